"""`hive-bash top`: the daemon's running tasks as a live table, each with its age, the CPU and memory of its
processes (psutil, over the task's process tree), how fast its output grows, whether it waits for input, and
the calls the daemon is answering now.

A task waits for input when one of its processes is blocked reading the task's own stdin (its fd 0 is the
leader's, and the kernel's wait channel is a pipe or terminal read): read from /proc, so it is known for a
task of this machine's daemon that the operator may look at (root, or the daemon's user)."""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

from common.cli_base import DaemonClient
from common.humanize import human_age, human_bytes
from common.live_table import calls_in_flight, in_flight_line, table

FIRST_WINDOW = 0.5  # seconds: the first frame's measuring window (CPU and output growth need two looks)
CMD_CHARS = 48
# Where a process blocked reading a pipe or a terminal sleeps (/proc/<pid>/wchan; names differ by kernel).
READ_WAITS = frozenset({"pipe_read", "anon_pipe_read", "pipe_wait", "n_tty_read", "wait_woken"})


def _tree(pid: int | None) -> list[psutil.Process]:
    if not pid:
        return []
    try:
        leader = psutil.Process(pid)
        return [leader, *leader.children(recursive=True)]
    except psutil.Error:
        return []


def _read_link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def waits_for_input(procs: list[psutil.Process]) -> bool:
    """One of them is blocked reading the leader's stdin (a pipe or a terminal, not /dev/null)."""
    if not procs:
        return False
    stdin = _read_link(f"/proc/{procs[0].pid}/fd/0")
    if stdin is None or stdin == "/dev/null":
        return False
    for proc in procs:
        try:
            with open(f"/proc/{proc.pid}/wchan") as f:
                channel = f.read().strip()
        except OSError:
            continue
        if channel in READ_WAITS and _read_link(f"/proc/{proc.pid}/fd/0") == stdin:
            return True
    return False


def _output_bytes(status: dict[str, Any]) -> int:
    """The task's stdout and stderr sizes now: a stat of each file, else what the status said."""
    total = 0
    for stream in ("stdout", "stderr"):
        view = status.get(stream) or {}
        try:
            total += os.stat(view["path"]).st_size
        except (KeyError, OSError):
            total += int(view.get("size") or 0)
    return total


class TopSampler:
    """One frame a `sample()`: the figures are rates over the time since the last frame (the first frame
    looks twice, FIRST_WINDOW apart). Processes are kept across frames for psutil's CPU percentages."""

    def __init__(self, client: DaemonClient):
        self.client = client
        self._procs: dict[int, psutil.Process] = {}
        self._sizes: dict[str, int] = {}
        self._at: float | None = None

    def _look(self) -> tuple[list[dict[str, Any]], int]:
        running = self.client.call("list", {"state": "running", "limit": 1000}).data.get("tasks", [])
        pending = self.client.call("list", {"state": "pending", "limit": 1}).data.get("total", 0)
        statuses = []
        for task in running:
            statuses.append({**task, **self.client.call("status", {"id": task["id"]}).data})
        return statuses, int(pending)

    def _cached(self, proc: psutil.Process) -> psutil.Process:
        kept = self._procs.get(proc.pid)
        if kept is not None and kept.is_running():
            return kept
        self._procs[proc.pid] = proc
        proc.cpu_percent(None)  # the first call only starts psutil's count
        return proc

    def sample(self) -> dict[str, Any]:
        if self._at is None:
            for status in self._look()[0]:
                self._sizes[status["id"]] = _output_bytes(status)
                for proc in _tree(status.get("pid")):
                    self._cached(proc)
            self._at = time.monotonic()
            time.sleep(FIRST_WINDOW)
        statuses, pending = self._look()
        now = time.monotonic()
        window = max(now - self._at, 1e-3)
        rows = [self._row(status, window) for status in statuses]
        self._at = now
        return {"url": self.client.url, "time": time.strftime("%H:%M:%S"), "running": len(rows),
                "pending": pending, "tasks": rows,
                "calls_in_flight": calls_in_flight(self.client.url, self.client.token, "hive_bash")}

    def _row(self, status: dict[str, Any], window: float) -> dict[str, Any]:
        procs = [self._cached(p) for p in _tree(status.get("pid"))]
        cpu, rss = 0.0, 0
        for proc in procs:
            try:
                cpu += proc.cpu_percent(None)
                rss += proc.memory_info().rss
            except psutil.Error:
                continue
        size = _output_bytes(status)
        before = self._sizes.get(status["id"])
        self._sizes[status["id"]] = size
        return {"id": status["id"], "age_seconds": status.get("age_seconds") or status.get("duration") or 0,
                "pid": status.get("pid"), "processes": len(procs), "cpu_percent": round(cpu, 1),
                "memory_bytes": rss, "output_bytes": size,
                "output_bytes_per_second": None if before is None else round(max(0, size - before) / window),
                "stdin": status.get("stdin"), "waiting_for_input": waits_for_input(procs),
                "cmd": status.get("cmd", "")}


def render_frame(frame: dict[str, Any]) -> str:
    head = f"hive-bash top  {frame['url']}  {frame['time']}  running {frame['running']}, pending {frame['pending']}"
    if not frame["tasks"]:
        return f"{head}\n{in_flight_line(frame['calls_in_flight'])}\n(no running tasks)"
    rows = []
    for t in frame["tasks"]:
        rate = t["output_bytes_per_second"]
        cmd = t["cmd"].replace("\n", " ")
        rows.append([t["id"], human_age(t["age_seconds"]), str(t["pid"] or "-"), str(t["processes"]),
                     f"{t['cpu_percent']:.0f}%", human_bytes(t["memory_bytes"]), human_bytes(t["output_bytes"]),
                     "-" if rate is None else human_bytes(rate) + "/s",
                     "input" if t["waiting_for_input"] else "", cmd if len(cmd) <= CMD_CHARS else
                     cmd[:CMD_CHARS - 1] + "…"])
    body = table(["ID", "AGE", "PID", "PROCS", "CPU", "MEM", "OUTPUT", "GROWTH", "WAITS", "COMMAND"], rows,
                 right=frozenset({1, 2, 3, 4, 5, 6, 7}))
    return f"{head}\n{in_flight_line(frame['calls_in_flight'])}\n\n{body}"
