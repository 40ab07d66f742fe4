"""Bash daemon, tasks that wait for input: how soon a `send` to a REPL answers after the REPL is back at its
prompt, and what the watch of idle REPLs costs the daemon.

- `send` of a line to `python3 -i` on a tty, with no `wait_for`: the wait ends when the kernel shows the REPL
  reading its terminal again. A thread of the benchmark follows the task's output file (a stat every 0.2 ms)
  and notes when the prompt is back; the figure is the answer's arrival after that moment, beside the same
  send with `wait_for: ">>> $"` (the prompt matched in the output, the way before), interleaved.
- The daemon's CPU per second of wall time with 32 idle `python3 -i` tasks on ttys (each looked at once a
  second by the input watch), beside the same daemon with 32 idle `sleep` tasks without input (nothing to
  look at), measured one after the other in the same run.
"""

import itertools
import os
import threading
import time

import psutil
from bench_bash import DAEMON
from bench_support import Daemon, McpConnection, Row, percentiles

PROMPT = b">>> "


class PromptClock:
    """Follows an output file; `wait_back(size)` returns when the file, grown past `size`, ends with the prompt."""

    def __init__(self, path: str):
        self.path = path

    def wait_back(self, size: int, deadline: float) -> float:
        while time.monotonic() < deadline:
            st = os.stat(self.path)
            if st.st_size > size:
                with open(self.path, "rb") as f:
                    f.seek(max(0, st.st_size - len(PROMPT)))
                    if f.read() == PROMPT:
                        return time.monotonic()
            time.sleep(0.0002)
        raise TimeoutError("the prompt did not come back")


def _one_send(conn: McpConnection, clock: PromptClock, text: str, wait_for: bool) -> tuple[float, float]:
    """(the answer's arrival after the prompt came back, the round trip), in seconds."""
    args = {"id": "py", "text": text, "wait_seconds": 10} | ({"wait_for": ">>> $"} if wait_for else {})
    size = os.stat(clock.path).st_size
    back: list[float] = []
    watcher = threading.Thread(target=lambda: back.append(clock.wait_back(size + 1, time.monotonic() + 10)))
    watcher.start()
    sent = time.monotonic()
    answer = conn.call("send", args)
    answered = time.monotonic()
    watcher.join()
    assert answer["structuredContent"]["status"] == "running", answer
    return max(0.0, answered - back[0]), answered - sent


def send_to_a_repl(ctx):
    n = ctx.reps(200, 40)
    serial = itertools.count()
    after: dict[bool, list[float]] = {False: [], True: []}
    trips: dict[bool, list[float]] = {False: [], True: []}
    with Daemon(DAEMON, ctx.workdir / "repl-send") as d:
        conn = McpConnection(d.port)
        started = conn.call("run", {"cmd": "python3 -i -q", "stdin": "tty", "name": "py", "wait_seconds": 20})
        clock = PromptClock(started["structuredContent"]["stdout"]["path"])
        for i in range(n + 10):
            for wait_for in (False, True):  # interleaved
                late, trip = _one_send(conn, clock, f"print({next(serial)})", wait_for)
                if i >= 10:  # the first ten: warm-up
                    after[wait_for].append(late)
                    trips[wait_for].append(trip)
        conn.call("kill", {"id": "py", "force": True})
        conn.close()
    (med, p99), (bmed, _) = percentiles(after[False]), percentiles(after[True])
    (tmed, tp99), (wmed, _) = percentiles(trips[False]), percentiles(trips[True])
    return [Row("bash", "send to python3 -i (tty): answer after the prompt is back", "ms", med, p99, n,
                "the same with wait_for \">>> $\"", bmed, target="a few ms (< 5 ms median)", ok=med < 5),
            Row("bash", "  its round trip (send to answer)", "ms", tmed, tp99, n, "with wait_for", wmed,
                note="print(N) to a REPL")]


def _daemon_cpu_ms_per_s(pid: int, seconds: float) -> float:
    proc = psutil.Process(pid)
    before, t0 = sum(proc.cpu_times()[:2]), time.monotonic()
    time.sleep(seconds)
    return (sum(proc.cpu_times()[:2]) - before) * 1000 / (time.monotonic() - t0)


def _idle_cpu(ctx, name: str, cmd: str, stdin: str, count: int, seconds: float) -> float:
    with Daemon(DAEMON, ctx.workdir / f"idle-{name}", env={"HIVE_BASH_MAX_RUNNING": str(count + 4)}) as d:
        conn = McpConnection(d.port)
        for i in range(count):
            conn.call("run", {"cmd": cmd, "stdin": stdin, "name": f"{name}-{i}",
                              "wait_seconds": 10 if stdin != "null" else 0})  # a REPL's run answers at its prompt
        deadline = time.monotonic() + 60
        while conn.call("list", {"state": "running", "limit": 1})["structuredContent"]["total"] < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{count} {name} tasks did not all start")
            time.sleep(0.1)
        time.sleep(1.5)  # past the answers' own work: the watch's passes only
        cpu = _daemon_cpu_ms_per_s(d.proc.pid, seconds)
        conn.close()
    return cpu


def idle_repls(ctx):
    count, seconds = 32, 10.0 if not ctx.quick else 4.0
    repls = _idle_cpu(ctx, "repl", "python3 -i -q", "tty", count, seconds)
    sleeps = _idle_cpu(ctx, "sleep", "sleep 600", "null", count, seconds)
    return [Row("bash", f"daemon CPU with {count} idle python3 -i tasks (tty)", "ms/s", repls, None, 1,
                f"{count} idle sleep tasks (no input)", sleeps, target="within 2 ms/s of the baseline",
                ok=repls - sleeps <= 2.0, note="the input watch looks at each once a second; the baseline is "
                                               "the daemon's own idle work with 32 tasks (its output guard, ...)")]


BENCHMARKS = [send_to_a_repl, idle_repls]
