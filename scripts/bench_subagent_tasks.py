"""The MCP tasks extension on the subagent daemon: what a client's `tasks/get` poll of a working turn costs,
beside status(name) of the same running session, and whether 16 tracked turns polled every second slow a
status call.

claude is a stand-in shell script that prints its init line and then sleeps: every turn stays running for as
long as the bench measures, and the rows measure the daemon's poll handling, not claude.
"""

import time

from bench_support import VENV_BIN, Daemon, McpConnection, Row, percentiles
from bench_tasks import Poller, TasksConnection, interleaved_cost, polled_and_quiet

TRACKED = 16
# The session id is the daemon's own (--session-id), as claude's init line reports it.
CLAUDE_STAND_IN = """#!/bin/sh
sid=bench
while [ $# -gt 0 ]; do [ "$1" = --session-id ] && sid=$2; shift; done
echo "{\\"type\\":\\"system\\",\\"subtype\\":\\"init\\",\\"session_id\\":\\"$sid\\",\\"model\\":\\"claude-bench\\"}"
exec sleep 3600
"""
# Room for the tracked turns and the measured ones: the default max-running is 4.
ENV = {"HIVE_SUBAGENT_MAX_RUNNING": str(TRACKED + 4)}


def _daemon(root) -> Daemon:
    """A subagent daemon running the stand-in claude, its HOME an empty folder (no transcripts to look up)."""
    (root / "work").mkdir(parents=True)
    (root / "home").mkdir()
    claude = root / "claude"
    claude.write_text(CLAUDE_STAND_IN)
    claude.chmod(0o755)
    argv = [str(VENV_BIN / "hive-subagent-daemon"), "--claude-bin", str(claude), "--workdir", str(root / "work"),
            "--state-dir", str(root / "state")]
    return Daemon(argv, root / "daemon", env={**ENV, "HOME": str(root / "home")})


def _tracked(client: TasksConnection, root, n: int) -> list[str]:
    """`n` running turns started as tasks (sessions poll-0 ...), each with its handle, each polled once."""
    prompt_file = root / "prompt.md"
    prompt_file.write_text("You are a benchmark subagent.\n")
    handles = []
    for i in range(n):
        result = client.call("start", {"name": f"poll-{i}", "prompt_file": str(prompt_file)})
        if result.get("resultType") != "task":
            raise RuntimeError(f"start of poll-{i} answered no task: {result}")
        handles.append(result["taskId"])
    deadline = time.monotonic() + 30
    for handle in handles:
        while (state := client.get(handle))["status"] != "working" or "running" not in state.get("statusMessage", ""):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{handle} is not a running turn: {state}")
            time.sleep(0.05)
    return handles


def poll_cost(ctx):
    """Daemon CPU and round trip of one tasks/get of a working turn, beside status(name) of the same running
    session (the poll the model itself would make), interleaved."""
    n = ctx.reps(2000, 300)
    root = ctx.workdir / "subagent-tasks-cost"
    with _daemon(root) as d:
        client = TasksConnection(d.port)
        handles = _tracked(client, root, TRACKED)
        calls = {"get": lambda: client.get(handles[0]), "status": lambda: client.call("status", {"name": "poll-0"})}
        samples, cpu, idle = interleaved_cost(d.proc.pid, calls, n)
        client.close()
    (gmed, gp99), (smed, sp99) = percentiles(samples["get"]), percentiles(samples["status"])
    return [Row("subagent_tasks", "tasks/get of a working turn: daemon CPU", "ms", cpu["get"], None, n,
                "status(name)", cpu["status"], target="< 1 ms, well under", ok=cpu["get"] < 1.0,
                note=f"less {idle * 1000:.1f} ms/s idle, {TRACKED} turns running"),
            Row("subagent_tasks", "tasks/get of a working turn: round trip", "ms", gmed, gp99, n, "status(name)", smed,
                note=f"status(name) p99 {sp99:.3f} ms")]


def status_under_polls(ctx):
    """status(name) of a running session while a client polls 16 tracked turns once a second, and with no
    polling, interleaved in rounds (the same daemon, the turns tracked and running in both)."""
    n = ctx.reps(400, 80)
    root = ctx.workdir / "subagent-tasks-polls"
    with _daemon(root) as d:
        client, caller = TasksConnection(d.port), McpConnection(d.port)
        poller = Poller(client, _tracked(client, root, TRACKED))
        samples = polled_and_quiet(poller, lambda: caller.call("status", {"name": "poll-0"}), n)
        poller.close()
        caller.close()
    (pmed, pp99), (qmed, qp99) = percentiles(samples["polled"]), percentiles(samples["quiet"])
    return [Row("subagent_tasks", f"status(name) while {TRACKED} tracked turns are polled each second", "ms", pmed,
                pp99, n, "no polling", qmed, target="<= 1.10x", ok=pmed <= 1.10 * qmed, note=f"{poller.polls} polls"),
            Row("subagent_tasks", "  baseline: the same call, no polling", "ms", qmed, qp99, n)]


BENCHMARKS = [poll_cost, status_under_polls]
