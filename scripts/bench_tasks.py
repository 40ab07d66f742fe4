"""The MCP tasks extension: what a client's `tasks/get` poll costs the daemon, and whether 64 tracked tasks
polled every second (Claude Code polls each task every pollIntervalMs, at least 250 ms) slow anyone else's call."""

import json
import threading
import time

import psutil
from bench_support import VENV_BIN, Daemon, McpConnection, Row, percentiles, timed

DAEMON = [str(VENV_BIN / "hive-bash-daemon")]
EXTENSION = "io.modelcontextprotocol/tasks"
TRACKED = 64
# Room for the tracked tasks (each a running `sleep`) and the measured calls' own: the default max-running is 32.
ENV = {"HIVE_BASH_MAX_RUNNING": "128", "HIVE_BASH_KEEP_TASKS": "100000"}


class TasksConnection(McpConnection):
    """A keep-alive connection of a client that declared the tasks extension: tools/call and tasks/get."""

    def __init__(self, port: int):
        super().__init__(port)
        self.meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                     "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}}}

    def get(self, handle: str) -> dict:
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": "tasks/get",
                           "params": {"taskId": handle, "_meta": self.meta}})
        self.conn.request("POST", "/mcp", body=body, headers={
            "Content-Type": "application/json", "Accept": "application/json", "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tasks/get", "Mcp-Name": handle})
        payload = json.loads(self.conn.getresponse().read())
        if "error" in payload:
            raise RuntimeError(f"tasks/get: {payload['error']}")
        return payload["result"]


def _tracked(client: TasksConnection, n: int) -> list[str]:
    """`n` tasks that run on (a long sleep that prints a line), each with its handle."""
    handles = [client.call("run", {"cmd": "echo started; sleep 3600", "wait_seconds": 0})["taskId"] for _ in range(n)]
    for handle in handles:
        client.get(handle)  # each poll's progress counter made once, as a client's first poll makes it
    return handles


def _cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def _idle_rate(pid: int, seconds: float = 2.0) -> float:
    """The daemon's CPU seconds per second while nobody calls it."""
    before = _cpu(pid)
    time.sleep(seconds)
    return (_cpu(pid) - before) / seconds


def poll_cost(ctx):
    """Daemon CPU and round trip of one tasks/get of a running task, beside status(id) of the same task (the poll
    the model itself would make)."""
    n = ctx.reps(2000, 300)
    with Daemon(DAEMON, ctx.workdir / "tasks-cost", env=ENV) as d:
        client = TasksConnection(d.port)
        handles = _tracked(client, TRACKED)
        task_id = handles[0].rsplit("-", 1)[0]
        calls = {"get": lambda: client.get(handles[0]), "status": lambda: client.call("status", {"id": task_id})}
        samples: dict[str, list[float]] = {"get": [], "status": []}
        cpu: dict[str, float] = {"get": 0.0, "status": 0.0}
        for fn in calls.values():
            timed(fn, 50)  # warm-up
        idle = _idle_rate(d.proc.pid)
        for _ in range(10):
            for name, fn in calls.items():
                before, started = _cpu(d.proc.pid), time.monotonic()
                samples[name] += timed(fn, n // 10)
                # Less what the daemon spends meanwhile without any call (64 workers, housekeeping).
                cpu[name] += _cpu(d.proc.pid) - before - idle * (time.monotonic() - started)
        client.close()
    get_cpu, status_cpu = (cpu[k] / len(samples[k]) * 1000 for k in ("get", "status"))
    (gmed, gp99), (smed, sp99) = percentiles(samples["get"]), percentiles(samples["status"])
    return [Row("tasks", "tasks/get of a running task: daemon CPU", "ms", get_cpu, None, n, "status(id)", status_cpu,
                target="< 1 ms, well under", ok=get_cpu < 1.0, note=f"less {idle * 1000:.1f} ms/s idle"),
            Row("tasks", "tasks/get of a running task: round trip", "ms", gmed, gp99, n, "status(id)", smed,
                note=f"status(id) p99 {sp99:.3f} ms")]


def round_trip_under_polls(ctx):
    """run("true", wait_seconds=30) while a client polls 64 tracked tasks once a second, and with no polling,
    interleaved in rounds (the same daemon, the tasks tracked in both)."""
    n = ctx.reps(400, 80)
    with Daemon(DAEMON, ctx.workdir / "tasks-polls", env=ENV) as d:
        poller, caller = TasksConnection(d.port), McpConnection(d.port)
        handles = _tracked(poller, TRACKED)
        polling = threading.Event()
        stop = threading.Event()
        polls = [0]

        def poll_each_second():
            """Each task once a second, spread over the second (a client polls each on its own timer)."""
            while not stop.is_set():
                start = time.monotonic()
                for i, handle in enumerate(handles):
                    if polling.is_set():
                        poller.get(handle)
                        polls[0] += 1
                    stop.wait(max(0.0, start + (i + 1) / len(handles) - time.monotonic()))

        thread = threading.Thread(target=poll_each_second, daemon=True)
        thread.start()
        fn = lambda: caller.call("run", {"cmd": "true", "wait_seconds": 30})  # noqa: E731
        timed(fn, 30)  # warm-up
        samples: dict[str, list[float]] = {"polled": [], "quiet": []}
        for _ in range(10):
            for name in samples:
                (polling.set if name == "polled" else polling.clear)()
                time.sleep(1.1 if name == "polled" else 0.0)  # a whole second of polls before the calls
                samples[name] += timed(fn, n // 10)
        stop.set()
        thread.join(5)
        poller.close()
        caller.close()
    (pmed, pp99), (qmed, qp99) = percentiles(samples["polled"]), percentiles(samples["quiet"])
    return [Row("tasks", f'run("true") while {TRACKED} tracked tasks are polled each second', "ms", pmed, pp99, n,
                "no polling", qmed, target="<= 1.10x", ok=pmed <= 1.10 * qmed, note=f"{polls[0]} polls"),
            Row("tasks", "  baseline: the same call, no polling", "ms", qmed, qp99, n)]


BENCHMARKS = [poll_cost, round_trip_under_polls]
