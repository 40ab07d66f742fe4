"""The bash daemon's examples for docs/: its tool answers and the todo lines it sends, from a real
hive-bash-daemon driven through the MCP client (see docs_examples.py)."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

from bench_support import Daemon
from docs_examples import Normalizer, RecordingSocket, fenced, scratch

from common.mcp_client import call_tool

DAEMON = str(Path(sys.executable).parent / "hive-bash-daemon")
STATE = "/var/lib/hive-bash"
WORKDIR = "/root/work"
FIXED_RSS = "75.0MiB"  # the daemon's own high-water mark, which every task inherits (docs/tools/bash.md)


def _whole_seconds(m: re.Match) -> str:
    return f"{m[1]}{round(float(m[2])):.2f}{m[3]}"


def _age_column(m: re.Match) -> str:
    """list's AGE column: one fixed age, right-aligned in the same width."""
    return m[1] + "3m".rjust(len(m[2]))


NORMALIZE_PATTERNS = [
    (r"(duration=|waited=)([\d.]+)(s)", _whole_seconds),
    (r"cpu=[\d.]+s", "cpu=0.00s"),
    # A task that stayed smaller than the daemon shows its bound; which side of the daemon's own peak a
    # `sleep` lands on varies from run to run, so the examples always show the usual case, the bound.
    (r"max_rss<?=[\d.]+[KMG]?i?B", f"max_rss<={FIXED_RSS}"),
    (r'"max_rss_exact":( ?)(true|false)', r'"max_rss_exact":\1false'),
    (r"pids? [\d ]*\d", "pids 48213"),
    (r"(?m)^(\S+ +(?:pending|running|done|timed_out|killed|interrupted) +)(\d+[smhd])(?=  )", _age_column),
    (r'"(submitted_at|started_at|ended_at)":( ?)[\d.]+', r'"\1":\g<2>1764576000.25'),
    (r'"pid":( ?)\d+', r'"pid":\g<1>48207'),
    (r'"(duration|waited)":( ?)([\d.]+)', lambda m: f'"{m[1]}":{m[2]}{round(float(m[3])):.1f}'),
    (r'"(cpu_seconds|cpu_user|cpu_system)":( ?)[\d.]+', r'"\1":\g<2>0.002'),
    (r'"max_rss_bytes":( ?)\d+', r'"max_rss_bytes":\g<1>78643200'),
    (r'"leftover_pids":( ?)\[[\d, ]+\]', r'"leftover_pids":\g<1>[48213]'),
]


GENERATED_ID = "3fa9c1d2"


def call(url: str, tool: str, ids: dict[str, str] | None = None, **arguments) -> str:
    """The call as the model makes it, then the answer's text; a generated task id goes into `ids`."""
    shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in arguments.items())
    result = call_tool(url, tool, arguments)
    if ids is not None:
        ids[result.data["id"]] = GENERATED_ID
    return f"`{tool}({shown})` answers{' (an error)' if result.is_error else ''}:\n\n" + fenced(result.text)


def wait_until(predicate, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise SystemExit("docs-examples: the bash daemon did not reach the state an example needs")
        time.sleep(0.05)
    return value


def examples() -> dict[str, str]:
    with scratch() as root:
        work = root / "work"
        sock = RecordingSocket(root / "agent.sock")
        paths = {str(root / "state"): STATE, str(work): WORKDIR}
        with Daemon([DAEMON, "--state-dir", str(root / "state")], work,
                    env={"HIVE_AGENT_SOCKET": str(sock.path)}) as d:
            out = _drive(d.url, sock, paths)
        normalize = Normalizer(paths, NORMALIZE_PATTERNS)
        sock.close()
    return {name: normalize(text) for name, text in out.items()}


def _drive(url: str, sock: RecordingSocket, ids: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    out["bash-run-done"] = call(url, "run", cmd="echo building; echo 'warning: unused variable' >&2; echo '12 passed'",
                                name="build")
    out["bash-run-started"] = call(url, "run", cmd="sleep 2; echo '40 passed'", name="tests", wait_seconds=1)
    out["bash-run-capped"] = call(url, "run", ids, cmd="echo ok", wait_seconds=100)
    out["bash-run-refused"] = call(url, "run", cmd="true", name="Build!")
    out["bash-status-unknown"] = call(url, "status", id="nope")

    def tests_ended():
        return sock.sent(lambda m: m.get("key") == "tests" and m.get("data", {}).get("status") == "done")

    wait_until(tests_ended)
    lines = sock.sent(lambda m: m.get("key") == "tests")
    out["bash-todo-lines"] = fenced("\n".join(lines))
    out["bash-todo-done-data"] = fenced(json.dumps(json.loads(lines[-1])["data"], indent=2), "json")
    out["bash-todo-running-data"] = fenced(json.dumps(json.loads(lines[0])["data"], indent=2), "json")
    out["bash-status-done"] = call(url, "status", id="tests")
    out["bash-todo-clear-line"] = fenced(wait_until(lambda: sock.sent(lambda m: m.get("op") == "todo.clear"))[-1])

    call_tool(url, "run", {"cmd": "setsid sleep 30 & echo started", "name": "server"})
    wait_until(lambda: call_tool(url, "status", {"id": "server"}).data.get("leftover_pids"))
    out["bash-status-leftovers"] = call(url, "status", id="server")
    out["bash-kill-leftovers"] = call(url, "kill", id="server")

    call_tool(url, "run", {"cmd": "sleep 300", "name": "long", "wait_seconds": 0})
    wait_until(lambda: call_tool(url, "status", {"id": "long"}).data["status"] == "running")
    out["bash-kill"] = call(url, "kill", id="long")
    wait_until(lambda: call_tool(url, "status", {"id": "long"}).data["status"] == "killed")
    out["bash-list"] = call(url, "list")
    return out
