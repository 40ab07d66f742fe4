"""Todos: a tool call's latency with the harness socket up, down and slow, side by side.

Delivery runs on its own thread, so neither `upsert` nor a `run` call may depend on the socket's state. Both
figures take "up" (the reference sink answering at once) as the same-run baseline and interleave the three
states call by call, so machine noise lands on all three alike.
"""

import socket
import subprocess
import sys
import threading
from pathlib import Path

from bench_support import VENV_BIN, Daemon, McpConnection, Row, percentiles, timed

from common.todos.delivery import TodoDelivery

STATES = ("up", "down", "slow")
TARGET_RATIO = 1.5


class Sockets:
    """up: the reference sink; down: a path nobody listens on; slow: accepts, reads, never answers."""

    def __init__(self, workdir: Path):
        workdir.mkdir(parents=True, exist_ok=True)
        self.paths = {state: workdir / f"{state}.sock" for state in STATES}
        self.sink = subprocess.Popen([sys.executable, "-m", "common.todos.cli", "serve", "--socket",
                                      str(self.paths["up"]),
                                      "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.sink.stdout.readline()  # "serving": it listens
        threading.Thread(target=self._drain, daemon=True).start()
        self.slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.slow.bind(str(self.paths["slow"]))
        self.slow.listen(1024)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._hold, daemon=True).start()

    def _drain(self) -> None:
        for _ in self.sink.stdout:  # the sink prints every change; keep its pipe from filling up
            pass

    def _hold(self) -> None:
        while True:
            try:
                conn, _ = self.slow.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sink.terminate()
        self.sink.wait(10)
        self.slow.close()
        for conn in self.held:
            conn.close()


def _rows(name: str, samples: dict[str, list[float]], n: int) -> list[Row]:
    base_med, base_p99 = percentiles(samples["up"])
    rows = []
    for state in ("down", "slow"):
        med, p99 = percentiles(samples[state])
        rows.append(Row("todos", f"{name}, harness {state}", "ms", med, p99, n, "harness up", base_med,
                        target=f"<= {TARGET_RATIO}x baseline", ok=med <= TARGET_RATIO * base_med))
    rows.append(Row("todos", f"  baseline: {name}, harness up", "ms", base_med, base_p99, n))
    return rows


def _settle(todos: TodoDelivery, state: str) -> None:
    """Let the delivery work one upsert kicked off finish before the next state is measured: interleaved, it
    would otherwise be charged to the next state's call (it shares the GIL and two busy cores)."""
    if state == "up":
        todos.flush(5)
    elif state == "down":  # one failed connect, then back to the backoff wait
        todos.wait_until(lambda: not todos.status()["busy"], 5)
    # slow: the thread sits in recv on the first request until its timeout; there is nothing to wait for


def upsert_by_socket_state(ctx):
    """TodoDelivery.upsert in-process (coalesce, outbox write, wake the thread)."""
    n = ctx.reps(600, 150)
    sockets = Sockets(ctx.workdir / "todos-up")
    todos = {s: TodoDelivery("bash", ctx.workdir / f"todos-state-{s}", sockets.paths[s] if s != "down" else
                          ctx.workdir / "todos-up" / "nobody.sock") for s in STATES}
    samples: dict[str, list[float]] = {s: [] for s in STATES}
    try:
        for i in range(n):
            for state in STATES:
                samples[state] += timed(
                    lambda state=state, i=i: todos[state].upsert(f"t{i % 50}", f"done {i}", "Read(x)", {"i": i}), 1)
                _settle(todos[state], state)
    finally:
        for t in todos.values():
            t.close(timeout=3)
        sockets.close()
    return _rows("upsert()", samples, n)


def run_call_by_socket_state(ctx):
    """A real `run` tool call (wait_seconds=0) to hive-bash-daemon, one daemon per socket state."""
    n = ctx.reps(200, 50)
    sockets = Sockets(ctx.workdir / "todos-run")
    daemons, conns = {}, {}
    try:
        for state in STATES:
            path = sockets.paths[state] if state != "down" else ctx.workdir / "todos-run" / "nobody.sock"
            daemons[state] = Daemon([str(VENV_BIN / "hive-bash-daemon")], ctx.workdir / f"todos-run-{state}",
                                    env={"HIVE_AGENT_SOCKET": str(path), "HIVE_BASH_KEEP_TASKS": "100000"})
            conns[state] = McpConnection(daemons[state].port)
        samples: dict[str, list[float]] = {s: [] for s in STATES}
        for state in STATES:  # warm-up
            timed(lambda state=state: conns[state].call("run", {"cmd": "true", "wait_seconds": 0}), 5)
        for _ in range(n):
            for state in STATES:
                samples[state] += timed(
                    lambda state=state: conns[state].call("run", {"cmd": "true", "wait_seconds": 0}), 1)
    finally:
        for conn in conns.values():
            conn.close()
        for daemon in daemons.values():
            daemon.__exit__(None, None, None)
        sockets.close()
    return _rows('run("true", wait_seconds=0)', samples, n)


BENCHMARKS = [upsert_by_socket_state, run_call_by_socket_state]
