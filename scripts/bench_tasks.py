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


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def idle_rate(pid: int, seconds: float = 2.0) -> float:
    """The daemon's CPU seconds per second while nobody calls it."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / seconds


def interleaved_cost(pid: int, calls: dict, n: int) -> tuple[dict[str, list[float]], dict[str, float], float]:
    """Each of `calls` (name -> fn) n times, in ten interleaved rounds: (round trips, daemon CPU ms per call less
    its idle rate, the idle rate)."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    cpu: dict[str, float] = dict.fromkeys(calls, 0.0)
    for fn in calls.values():
        timed(fn, 50)  # warm-up
    idle = idle_rate(pid)
    for _ in range(10):
        for name, fn in calls.items():
            before, started = cpu_seconds(pid), time.monotonic()
            samples[name] += timed(fn, n // 10)
            # Less what the daemon spends meanwhile without any call (the tracked tasks, housekeeping).
            cpu[name] += cpu_seconds(pid) - before - idle * (time.monotonic() - started)
    return samples, {name: cpu[name] / len(samples[name]) * 1000 for name in calls}, idle


def poll_cost(ctx):
    """Daemon CPU and round trip of one tasks/get of a running task, beside status(id) of the same task (the poll
    the model itself would make)."""
    n = ctx.reps(2000, 300)
    with Daemon(DAEMON, ctx.workdir / "tasks-cost", env=ENV) as d:
        client = TasksConnection(d.port)
        handles = _tracked(client, TRACKED)
        task_id = handles[0].rsplit("-", 1)[0]
        calls = {"get": lambda: client.get(handles[0]), "status": lambda: client.call("status", {"id": task_id})}
        samples, cpu, idle = interleaved_cost(d.proc.pid, calls, n)
        client.close()
    get_cpu, status_cpu = cpu["get"], cpu["status"]
    (gmed, gp99), (smed, sp99) = percentiles(samples["get"]), percentiles(samples["status"])
    return [Row("tasks", "tasks/get of a running task: daemon CPU", "ms", get_cpu, None, n, "status(id)", status_cpu,
                target="< 1 ms, well under", ok=get_cpu < 1.0, note=f"less {idle * 1000:.1f} ms/s idle"),
            Row("tasks", "tasks/get of a running task: round trip", "ms", gmed, gp99, n, "status(id)", smed,
                note=f"status(id) p99 {sp99:.3f} ms")]


class Poller:
    """`client` polling each of `handles` once a second, spread over the second (a client polls each on its own
    timer), on a thread of its own, while `polling` is set."""

    def __init__(self, client: TasksConnection, handles: list[str]):
        self.client, self.handles = client, handles
        self.polling, self.stop = threading.Event(), threading.Event()
        self.polls = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            start = time.monotonic()
            for i, handle in enumerate(self.handles):
                if self.polling.is_set():
                    self.client.get(handle)
                    self.polls += 1
                self.stop.wait(max(0.0, start + (i + 1) / len(self.handles) - time.monotonic()))

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.client.close()


def polled_and_quiet(poller: Poller, fn, n: int) -> dict[str, list[float]]:
    """fn's round trips while the poller polls and while it does not, n of each in ten interleaved rounds."""
    timed(fn, 30)  # warm-up
    samples: dict[str, list[float]] = {"polled": [], "quiet": []}
    for _ in range(10):
        for name in samples:
            (poller.polling.set if name == "polled" else poller.polling.clear)()
            time.sleep(1.1 if name == "polled" else 0.0)  # a whole second of polls before the calls
            samples[name] += timed(fn, n // 10)
    poller.polling.clear()
    return samples


def round_trip_under_polls(ctx):
    """run("true", wait_seconds=30) while a client polls 64 tracked tasks once a second, and with no polling,
    interleaved in rounds (the same daemon, the tasks tracked in both)."""
    n = ctx.reps(400, 80)
    with Daemon(DAEMON, ctx.workdir / "tasks-polls", env=ENV) as d:
        client, caller = TasksConnection(d.port), McpConnection(d.port)
        poller = Poller(client, _tracked(client, TRACKED))
        samples = polled_and_quiet(poller, lambda: caller.call("run", {"cmd": "true", "wait_seconds": 30}), n)
        poller.close()
        caller.close()
    (pmed, pp99), (qmed, qp99) = percentiles(samples["polled"]), percentiles(samples["quiet"])
    return [Row("tasks", f'run("true") while {TRACKED} tracked tasks are polled each second', "ms", pmed, pp99, n,
                "no polling", qmed, target="<= 1.10x", ok=pmed <= 1.10 * qmed, note=f"{poller.polls} polls"),
            Row("tasks", "  baseline: the same call, no polling", "ms", qmed, qp99, n)]


BENCHMARKS = [poll_cost, round_trip_under_polls]
