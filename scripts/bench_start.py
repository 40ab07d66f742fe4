"""Start: from the daemon's exec to its first call answered, beside `python3 -c pass` in the same run.

A service restarted by systemd is down for this long: the agent's first call after it waits on it. Each figure
is the wall time from Popen to the end of the first answer (the ready file is polled every millisecond and
the call sent the moment it appears), the median of interleaved runs: a daemon start, then the baseline.
The project's bytecode is compiled first (into its __pycache__ folders, which git ignores), as a deployed package
has it: PYTHONDONTWRITEBYTECODE (set on these machines) would otherwise compile ~120 modules on every start.
The baseline is the same interpreter the daemons run (the venv's python3).

Rows: the bash daemon on an empty state directory (first call a 2026-07-28 `list`, and a handshake-era
`initialize`: Claude Code's first request), with 1,000 retained tasks, and the subagent daemon with 300
transcripts in its project folder (first call `status()`; the first start ever, with no saved index, and a
restart, which reads the index the last one saved).
"""

import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_sessions import CLAUDE_STAND_IN, build_folder
from bench_support import REPO, VENV_BIN, Daemon, McpConnection, Row

sys.path.insert(0, str(REPO))
from hivesubagent.transcripts.sessions import project_slug

TARGETS = {"bash-empty": 0.5, "bash-1000": 1.0, "subagent-300": 0.5}
MODERN = "2026-07-28"
HANDSHAKE_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                             "clientInfo": {"name": "bench", "version": "1"}}}


def _compile() -> None:
    subprocess.run([str(VENV_BIN / "python"), "-m", "compileall", "-q", "hivebash", "hivesubagent", "common"],
                   cwd=REPO, check=True, stdout=subprocess.DEVNULL)


def _first_call(port: int, tool: str | None) -> dict:
    """One first request on a fresh connection: tools/call `tool` (2026-07-28), or `initialize` for None."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if tool is None:
        body = HANDSHAKE_INIT
    else:
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {},
                                                                               "_meta": meta}}
        headers.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool})
    conn.request("POST", "/mcp", body=json.dumps(body), headers=headers)
    response = conn.getresponse()
    payload = json.loads(response.read())
    conn.close()
    if response.status != 200 or "error" in payload or payload["result"].get("isError"):
        raise RuntimeError(f"first call answered {response.status}: {str(payload)[:300]}")
    return payload


def time_first_answer(argv: list[str], workdir: Path, env: dict[str, str], tool: str | None) -> float:
    """Seconds from Popen to the end of the first answer."""
    workdir.mkdir(parents=True, exist_ok=True)
    ready = workdir / "ready.json"
    ready.unlink(missing_ok=True)
    with open(workdir / "daemon.log", "ab") as log:
        began = time.perf_counter()
        proc = subprocess.Popen([*argv, "--port", "0", "--ready-file", str(ready)], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir,
                                env=dict(os.environ, **env))
        try:
            deadline = began + 60
            while not ready.exists():
                if proc.poll() is not None or time.perf_counter() > deadline:
                    raise RuntimeError(f"{argv[0]} did not start; see {workdir / 'daemon.log'}")
                time.sleep(0.001)
            port = int(json.loads(ready.read_text())["url"].rsplit(":", 1)[1].split("/")[0])
            _first_call(port, tool)
            return time.perf_counter() - began
        finally:
            proc.terminate()
            proc.wait(30)


def time_pass() -> float:
    began = time.perf_counter()
    subprocess.run([str(VENV_BIN / "python3"), "-c", "pass"], check=True)
    return time.perf_counter() - began


def _interleaved(n: int, start) -> tuple[list[float], list[float]]:
    daemon, baseline = [], []
    for _ in range(n):
        daemon.append(start())
        baseline.append(time_pass())
    return daemon, baseline


def _row(label: str, key: str | None, samples: tuple[list[float], list[float]], note: str = "") -> Row:
    daemon, baseline = samples
    median = statistics.median(daemon)
    target = TARGETS.get(key or "")
    return Row("start", label, "ms", median * 1000, max(daemon) * 1000, len(daemon), "python3 -c pass",
               statistics.median(baseline) * 1000, target=f"< {target * 1000:.0f} ms" if target else "",
               ok=median < target if target else None, note=note)


def _retained_tasks(ctx, state: Path, count: int) -> None:
    """A state directory holding `count` ended tasks, made by a daemon that ran them."""
    argv = [str(VENV_BIN / "hive-bash-daemon"), "--state-dir", str(state), "--keep-tasks", str(count)]
    with Daemon(argv, ctx.workdir / "start-fill", env={}) as d:
        conn = McpConnection(d.port)
        for i in range(count):
            conn.call("run", {"cmd": f"echo task {i}", "wait_seconds": 0})
        deadline = time.monotonic() + 300
        while conn.call("list", {"state": "running"})["structuredContent"]["tasks"]:
            if time.monotonic() > deadline:
                raise RuntimeError("the retained tasks did not end")
            time.sleep(0.2)
        conn.close()


def bash_start(ctx):
    _compile()
    n = ctx.reps(11, 3)
    env: dict[str, str] = {}
    daemon = [str(VENV_BIN / "hive-bash-daemon")]
    empty = ctx.workdir / "start-empty"
    rows = [_row("bash daemon, empty state dir: start to first tools/call (2026) answered", "bash-empty",
                 _interleaved(n, lambda: time_first_answer([*daemon, "--state-dir", str(empty / "state")], empty,
                                                           env, "list"))),
            _row("bash daemon, empty state dir: start to first initialize (handshake era) answered", "bash-empty",
                 _interleaved(n, lambda: time_first_answer([*daemon, "--state-dir", str(empty / "state")], empty,
                                                           env, None)))]
    count = ctx.reps(1000, 200)
    full = ctx.workdir / "start-retained"
    _retained_tasks(ctx, full / "state", count)
    rows.append(_row(f"bash daemon, {count:,} retained tasks: start to first tools/call answered",
                     "bash-1000" if count == 1000 else None,
                     _interleaved(n, lambda: time_first_answer([*daemon, "--state-dir", str(full / "state"),
                                                                "--keep-tasks", str(count)], full, env, "list"))))
    return rows


def subagent_start(ctx):
    _compile()
    n = ctx.reps(11, 3)
    root = ctx.workdir / "start-subagent"
    home, work = root / "home", root / "work"
    work.mkdir(parents=True)
    file_bytes = ctx.reps(1 << 20, 64 << 10)
    build_folder(home / ".claude" / "projects" / project_slug(os.path.realpath(work)), 250, 50, file_bytes, 0)
    claude = root / "claude"
    claude.write_text(CLAUDE_STAND_IN)
    claude.chmod(0o755)
    env = {"HOME": str(home)}
    state = root / "state"

    def start() -> float:
        argv = [str(VENV_BIN / "hive-subagent-daemon"), "--claude-bin", str(claude), "--workdir", str(work),
                "--state-dir", str(state)]
        return time_first_answer(argv, root / "daemon", env, "status")

    first = start()  # nothing saved: every transcript is read
    size = f"300 transcripts of {file_bytes >> 10} KiB"
    return [_row(f"subagent daemon, {size}: first start ever to first status() answered", None,
                 ([first], [time_pass()])),
            _row(f"subagent daemon, {size}: restart to first status() answered", "subagent-300",
                 _interleaved(n, start))]


BENCHMARKS = [bash_start, subagent_start]
