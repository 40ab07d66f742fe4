"""The one todo sink of the tests: the reference harness end (`hive-todos serve --json`) as a subprocess, whose
event lines a reader thread collects as they are printed, so a test waits on a condition, never on a sleep.

`Sink(socket_path, log_dir)` for a socket a test places itself; `running_sink()` for one on a short /tmp path
(a Unix socket path holds at most 107 bytes, which pytest's tmp_path can exceed)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# `hive-todos` run as a module of this interpreter: the same code as the console script, and it works in a
# venv installed before the script was declared (tests/todos/test_cli.py checks the console script itself).
TODOS_CLI = [sys.executable, "-m", "common.todos.cli"]
REPO = Path(__file__).resolve().parents[2]


def wait_on(cond: threading.Condition, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Wait on `cond` (notified by the producer) until `predicate()` is truthy, or fail naming `what`."""
    deadline = time.monotonic() + timeout
    with cond:
        while True:
            value = predicate()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            cond.wait(remaining)


class Sink:
    """The real reference sink as a subprocess; its `--json` event lines are collected as they are printed."""

    def __init__(self, socket_path: Path, log_dir: Path):
        self.socket_path = socket_path
        self.stderr_path = log_dir / f"sink-{time.monotonic_ns()}.err"
        self._events: list[dict] = []
        self.cond = threading.Condition()
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [*TODOS_CLI, "serve", "--socket", str(socket_path), "--json"],
                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, cwd=REPO,
                env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # a SIGABRT then prints every thread's stack
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.wait_event(lambda e: e["event"] == "serving", "the sink to listen")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.cond:
                self._events.append(json.loads(line))
                self.cond.notify_all()
        with self.cond:
            self._events.append({"event": "exited"})
            self.cond.notify_all()

    def events(self) -> list[dict]:
        """Every event printed so far, oldest first."""
        with self.cond:
            return list(self._events)

    def wait_event(self, predicate: Callable[[dict], bool], what: str, timeout: float = 20.0) -> dict:
        def found():
            for event in self._events:
                if event["event"] == "exited" and not predicate(event):
                    raise AssertionError(f"sink exited while waiting for {what}: {self.stderr_path.read_text()}")
                if predicate(event):
                    return event
            return None

        return wait_on(self.cond, found, timeout, what)

    def changes(self, count: int = 0, key: str | None = None, timeout: float = 20.0) -> list[tuple]:
        """("upsert", key, summary) / ("clear", key) in the order the sink applied them, once at least `count`
        are printed. The sink prints a change before it acknowledges it, but our reader thread may still be
        behind: so wait for the last change a test expects (a duplicate before it would show in the list)."""
        wait_on(self.cond, lambda: len(self._changes(key)) >= count, timeout, f"{count} change(s) at the sink")
        return self._changes(key)

    def _changes(self, key: str | None) -> list[tuple]:
        with self.cond:
            out: list[tuple] = []
            for e in self._events:
                if e["event"] == "upsert" and key in (None, e["key"]):
                    out.append(("upsert", e["key"], e["summary"]))
                elif e["event"] == "clear" and key in (None, e["key"]):
                    out.append(("clear", e["key"]))
            return out

    def upserts(self, key: str) -> list[dict]:
        """The upsert events of `key` so far."""
        return [e for e in self.events() if e.get("event") == "upsert" and e.get("key") == key]

    def todos(self, source: str | None = "bash") -> dict[str, dict]:
        """The todos the sink holds now, from `hive-todos list --json`, by key (of `source`; None: every one)."""
        proc = subprocess.run([*TODOS_CLI, "list", "--socket", str(self.socket_path), "--json"], capture_output=True,
                              text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        return {t["key"]: t for t in json.loads(proc.stdout) if source is None or t["source"] == source}

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self._abort_with_stacks()
        self._reader.join(5)
        return self.proc.returncode

    def _abort_with_stacks(self) -> None:
        """A sink that outlives its SIGTERM by 15 s (seen once in a full run at teardown, not reproduced): its
        threads' stacks are reported as a warning so the next run says where it hung, and it is killed; the
        tests of the sink's own stop (tests/todos) still fail on it."""
        self.proc.send_signal(signal.SIGABRT)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        stacks = self.stderr_path.read_text(errors="replace")[-6000:]
        warnings.warn(f"the todo sink did not stop within 15 s of SIGTERM; its stacks:\n{stacks}", stacklevel=2)


@contextmanager
def running_sink() -> Iterator[Sink]:
    """A Sink on a fresh short directory under /tmp, stopped and removed afterwards."""
    folder = Path(tempfile.mkdtemp(dir="/tmp", prefix="sink-"))
    sink = Sink(folder / "agent.sock", folder)
    try:
        yield sink
    finally:
        sink.stop()
        shutil.rmtree(folder, ignore_errors=True)
