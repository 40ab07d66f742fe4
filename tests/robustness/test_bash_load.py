"""A bounded load test on loopback: several clients mix run/status/kill/list against one real bash daemon (with
the real todo sink) for LOAD_SECONDS. At the end every task is accounted for (each id a run returned is
listed, in a terminal state), no task process survives, no todo still says a finished task is running, and the
daemon's memory stayed roughly flat (RSS after warm-up against RSS at the end, with a generous bound).

Not a speed test (scripts/bench measures speed): the assertions are about correctness under concurrency.
"""

import json
import random
import threading
import time

import psutil
import pytest
from daemon_harness import wait_until
from kit.daemons_kit import task_processes

LOAD_SECONDS = 45.0
WARM_UP_SECONDS = 10.0
CLIENTS = 6
COMMANDS = ["true", "echo load", "exit 2", "sleep 0.2", "sleep 2", "yes | head -c 100000", "echo err >&2; false",
            "sleep 1 & wait", "trap '' INT; sleep 1"]
# Growth allowed between warm-up and the end: task records kept in memory (a few KiB each, thousands of tasks)
# plus allocator slack. A leak of the output or of threads per task would be far larger.
RSS_SLACK_BYTES = 64 * 1024 * 1024


class Client(threading.Thread):
    """One client's loop; every answer must be a success (no isError): the mix never asks anything invalid."""

    def __init__(self, n: int, daemon, stop: threading.Event):
        super().__init__(name=f"load-client-{n}", daemon=True)
        self.n, self.daemon_, self.stop = n, daemon, stop
        self.rng = random.Random(n)
        self.ids: list[str] = []
        self.calls = 0
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.step()
                self.calls += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.failure = exc

    def step(self) -> None:
        d, rng = self.daemon_, self.rng
        op = rng.choice(["run"] * 4 + ["status"] * 3 + ["kill", "list"]) if self.ids else "run"
        if op == "run":
            args = {"cmd": rng.choice(COMMANDS), "wait_seconds": rng.choice([0, 0, 0.05, 0.5])}
            if rng.random() < 0.3:
                args["name"] = f"c{self.n}-{len(self.ids)}"
            if rng.random() < 0.2:
                args["timeout_secs"] = 1
            data = d.call("run", **args)
            assert data["status"] in ("pending", "running", "done", "timed_out", "killed")
            self.ids.append(data["id"])
        elif op == "status":
            data = d.call("status", id=rng.choice(self.ids[-50:]), wait_seconds=rng.choice([0, 0, 0.2]))
            assert data["status"] in ("pending", "running", "done", "timed_out", "killed")
        elif op == "kill":
            data = d.call("kill", id=rng.choice(self.ids[-20:]), force=rng.random() < 0.5)
            assert data["action"] in ("cancelled", "signalled", "leftovers", "nothing")
        else:
            data = d.call("list", limit=50, **({"state": "running"} if rng.random() < 0.5 else {}))
            assert data["total"] >= len(data["tasks"])


@pytest.mark.slow
def test_mixed_load_every_task_accounted_for_and_memory_flat(bash_factory, sink_factory):
    sink = sink_factory()
    daemon = bash_factory("--max-running", "16", "--keep-tasks", "100000", "--kill-grace", "0.5")
    proc = psutil.Process(daemon.pid)
    stop = threading.Event()
    clients = [Client(n, daemon, stop) for n in range(CLIENTS)]
    started = time.monotonic()
    for c in clients:
        c.start()
    wait_until(lambda: time.monotonic() - started >= WARM_UP_SECONDS or any(c.failure for c in clients),
               WARM_UP_SECONDS + 5, "the warm-up", interval=0.2)
    rss_warm = proc.memory_info().rss
    wait_until(lambda: time.monotonic() - started >= LOAD_SECONDS or any(c.failure for c in clients),
               LOAD_SECONDS + 5, "the load period", interval=0.2)
    stop.set()
    for c in clients:
        c.join(120)
        assert not c.is_alive(), f"{c.name} is stuck"
    for c in clients:
        assert c.failure is None, f"{c.name}: {c.failure!r}"
    ids = [i for c in clients for i in c.ids]
    assert len(ids) == len(set(ids)), "no id handed out twice"

    wait_until(lambda: not daemon.tasks("running") and not daemon.tasks("pending"), 60, "every task to end")
    # `list` shows at most 1000 rows but counts them all; per state, the counts must add up to every task.
    totals = {state: daemon.call("list", state=state, limit=1)["total"]
              for state in ("pending", "running", "done", "timed_out", "killed", "interrupted")}
    assert daemon.call("list", limit=1)["total"] == len(ids) == sum(totals.values()), (len(ids), totals)
    assert totals["pending"] == totals["running"] == totals["interrupted"] == 0, totals
    records = {i: json.loads((daemon.state_dir / "bash-tasks" / f"{i}.json").read_text()) for i in ids}
    assert {r["state"] for r in records.values()} <= {"done", "timed_out", "killed"}
    for task_id in random.Random(0).sample(ids, min(200, len(ids))):
        assert daemon.call("status", id=task_id)["status"] == records[task_id]["state"]
    markers = {r["marker"] for r in records.values()}
    wait_until(lambda: not task_processes(markers), 30, "no process of any task to remain")

    def no_stale_running_todo():
        return not [t for t in sink.todos().values() if " running" in t["summary"] or " queued" in t["summary"]]

    wait_until(no_stale_running_todo, 30, "no todo to still say a finished task is running", interval=0.5)
    rss_end = proc.memory_info().rss
    assert rss_end <= rss_warm * 2 and rss_end - rss_warm <= RSS_SLACK_BYTES, (
        f"daemon RSS grew from {rss_warm >> 20} MiB after warm-up to {rss_end >> 20} MiB ({len(ids)} tasks)")
    assert proc.num_threads() < 60, f"{proc.num_threads()} threads left in an idle daemon"
    print(f"load: {len(ids)} tasks, {sum(c.calls for c in clients)} calls, RSS {rss_warm >> 20} -> {rss_end >> 20} MiB")
