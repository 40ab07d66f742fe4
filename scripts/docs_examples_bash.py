"""The bash daemon's examples for docs/: its tool answers and the todo lines it sends, from a real
hive-bash-daemon driven through the MCP client (see docs_examples.py)."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

from bench_support import Daemon
from docs_examples import Normalizer, RecordingSocket, fenced, scratch, shown_call, wait_until

from common.protocol.client import call_tool

DAEMON = str(Path(sys.executable).parent / "hive-bash-daemon")
STATE = "/var/lib/hive-bash"
WORKDIR = "/root/work"
FIXED_RSS = "75.0MiB"  # the daemon's own high-water mark, which every task inherits (docs/tools/bash.md)


def whole_seconds(seconds: str) -> int:
    """The whole seconds the examples' tasks sleep: load adds time (up to a second is cut off), and a task's
    duration can read a few ms short of its sleep (its clock starts once its worker is back from the spawn)."""
    return math.floor(float(seconds) + 0.1)


def _whole_seconds(m: re.Match) -> str:
    return f"{m[1]}{whole_seconds(m[2]):.2f}{m[3]}"


def _age_column(m: re.Match) -> str:
    """list's AGE column: one fixed age, right-aligned in the same width."""
    return m[1] + "3m".rjust(len(m[2]))


NORMALIZE_PATTERNS = [
    (r"(duration=|waited=|ended within |still running |sent \w+ )([\d.]+)(s)", _whole_seconds),
    (r"cpu=[\d.]+s", "cpu=0.00s"),
    (r"max_rss(<?=)[\d.]+[KMG]?i?B", rf"max_rss\g<1>{FIXED_RSS}"),
    (r"pids? [\d ]*\d", "pids 48213"),
    (r"(?m)^(\S+ +(?:pending|running|done|timed_out|killed|interrupted) +)(\d+[smhd])(?=  )", _age_column),
    (r'"(submitted_at|started_at|ended_at)":( ?)[\d.]+', r'"\1":\g<2>1764576000.25'),
    (r'"pid":( ?)\d+', r'"pid":\g<1>48207'),
    (r'"(duration|waited)":( ?)([\d.]+)', lambda m: f'"{m[1]}":{m[2]}{whole_seconds(m[3]):.1f}'),
    (r'"(cpu_seconds|cpu_user|cpu_system)":( ?)[\d.]+', r'"\1":\g<2>0.002'),
    (r'"max_rss_bytes":( ?)\d+', r'"max_rss_bytes":\g<1>78643200'),
    (r'"leftover_pids":( ?)\[[\d, ]+\]', r'"leftover_pids":\g<1>[48213]'),
]


GENERATED_ID = "3fa9c1d2"


def call(url: str, tool: str, id_map: dict[str, str] | None = None, **arguments) -> str:
    """The call and its answer; a generated task id goes into `id_map` (to be set to one fixed id)."""
    text, result = shown_call(url, tool, arguments)
    if id_map is not None:
        id_map[result.data["id"]] = GENERATED_ID
    return text


BROKEN_UPSERT = '{"op":"todo.upsert","key":"","source":"bash","summary":"s","body":""}'


def exchange_with_reference_sink(requests: list[str]) -> str:
    """Each request line (`>`) and what the reference sink (hive-todos serve) answers it (`<`)."""
    from common.todos.sink import TodoBoard

    board = TodoBoard(as_json=True)
    board.quiet = True  # the board prints each change; only its replies matter here
    shown = []
    for line in requests:
        shown += [f"> {line}", f"< {json.dumps(board.handle(line.encode()), ensure_ascii=False)}"]
    return "\n".join(shown)


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
    out["bash-run-started"] = call(url, "run", cmd="sleep 3; echo '40 passed'", name="tests", wait_seconds=2)
    out["bash-run-capped"] = call(url, "run", ids, cmd="echo ok", wait_seconds=100)
    out["bash-run-refused"] = call(url, "run", cmd="true", name="Build!")
    out["bash-status-unknown"] = call(url, "status", id="nope")

    def tests_ended():
        return sock.sent(lambda m: m.get("key") == "tests" and m.get("data", {}).get("status") == "done")

    wait_until(tests_ended, "task tests's completion todo")
    lines = sock.sent(lambda m: m.get("key") == "tests")
    out["bash-todo-lines"] = fenced("\n".join(lines))
    out["bash-todo-done-data"] = fenced(json.dumps(json.loads(lines[-1])["data"], indent=2), "json")
    out["bash-todo-running-data"] = fenced(json.dumps(json.loads(lines[0])["data"], indent=2), "json")
    out["bash-status-done"] = call(url, "status", id="tests")
    clear = wait_until(lambda: sock.sent(lambda m: m.get("op") == "todo.clear"), "the clear of tests's todo")[-1]
    out["bash-todo-clear-line"] = fenced(clear)
    out["protocol-upsert"] = fenced(lines[-1], "json")
    out["protocol-exchange"] = fenced(exchange_with_reference_sink([*lines, clear, BROKEN_UPSERT]))

    out["bash-run-leftovers"] = call(url, "run", cmd="setsid sleep 30 & echo started", name="server")
    out["bash-kill-leftovers"] = call(url, "kill", id="server")

    call_tool(url, "run", {"cmd": "sleep 300", "name": "long", "wait_seconds": 0})
    wait_until(lambda: call_tool(url, "status", {"id": "long"}).data["status"] == "running", "task long to run")
    out["bash-kill"] = call(url, "kill", id="long")
    wait_until(lambda: call_tool(url, "status", {"id": "long"}).data["status"] == "killed", "task long to end")
    out["bash-list"] = call(url, "list")

    call_tool(url, "run", {"cmd": "for i in $(seq 1 9000); do echo \"compiling unit $i\"; done; "
                                  "echo 'error: unit 5000 failed: missing symbol' >&2; exit 1", "name": "make",
                           "wait_seconds": 30})
    out["bash-status-grep"] = call(url, "status", id="make", grep="unit 500[0-9]$|error", context=1)
    out["bash-status-window"] = call(url, "status", id="make", from_line=4998, max_lines=4, stream="stdout")
    # "two" waits for a file the script makes once the agent has been shown "one" (timing-proof).
    gate = Path(next(real for real, shown in ids.items() if shown == WORKDIR)) / "gate"
    call_tool(url, "run",
              {"cmd": "echo one; until [ -e gate ]; do sleep 0.05; done; echo two; sleep 30", "name": "feed",
                           "wait_seconds": 0})
    wait_until(lambda: "one" in call_tool(url, "status", {"id": "feed"}).data["stdout"]["tail"], "feed's first line")
    call_tool(url, "status", {"id": "feed"}, operator=False)  # the agent sees "one"
    gate.touch()
    wait_until(lambda: "two" in call_tool(url, "status", {"id": "feed"}).data["stdout"]["tail"], "feed's second line")
    out["bash-status-new-only"] = call(url, "status", id="feed", new_only=True)
    call_tool(url, "run", {"cmd": "sleep 0.2; echo built", "name": "build-a", "wait_seconds": 0})
    call_tool(url, "run", {"cmd": "sleep 30", "name": "build-b", "wait_seconds": 0})
    # Sleeps of 0.2 s: the examples round times to whole seconds, so a loaded machine still prints 0.00s.
    out["bash-status-ids"] = call(url, "status", ids=["build-a", "build-b"], wait_seconds=20)
    out["bash-run-wait-for"] = call(url, "run",
                                    cmd="echo starting; sleep 0.2; echo 'listening on http://127.0.0.1:8080'; "
                                    "sleep 300", name="web", wait_for="listening on", wait_seconds=20)
    for task in ("feed", "build-b", "web"):
        call_tool(url, "kill", {"id": task, "force": True})
    _drive_interactive(url, out)
    return out


def _drive_interactive(url: str, out: dict[str, str]) -> None:
    """`stdin` and `send`: a Python REPL on a terminal, a y/N prompt on a pipe, input nobody reads, a refusal."""
    out["bash-run-tty"] = call(url, "run", cmd="python3 -i -q", stdin="tty", name="py", wait_for=">>> $")
    out["bash-send-repl"] = call(url, "send", id="py", text="sum(range(10))", wait_for=">>> $")
    call_tool(url, "send", {"id": "py", "text": "exit()"}, operator=False)
    call_tool(url, "run", {"cmd": 'read -p "Overwrite? [y/N] " a; echo "answer: $a"', "stdin": "pipe",
                           "name": "ask", "wait_seconds": 0}, operator=False)
    out["bash-send-prompt"] = call(url, "send", id="ask", text="y")
    call_tool(url, "run", {"cmd": "sleep 300", "stdin": "pipe", "name": "deaf", "wait_seconds": 0}, operator=False)
    call_tool(url, "send", {"id": "deaf", "text": "x" * 65536, "enter": False, "wait_seconds": 0}, operator=False)
    out["bash-send-partial"] = call(url, "send", id="deaf", text="one line more", wait_seconds=0)
    call_tool(url, "kill", {"id": "deaf", "force": True})
    out["bash-send-refused"] = call(url, "send", id="build", text="y")
