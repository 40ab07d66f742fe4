"""Fixtures for the todo tests: short socket directories, TodoDelivery instances, the real `hive-todos serve`
as a subprocess, and an in-process fake harness for the misbehaviours the real sink never shows (slow, malformed,
error replies, hanging up mid-reply)."""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from daemon_harness import TODOS_CLI

from common.todos.delivery import TodoDelivery

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


@pytest.fixture
def short_dir():
    """A directory under /tmp whose paths stay well below the 108-byte Unix socket limit."""
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="todos-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Sink:
    """The real reference sink as a subprocess; its `--json` event lines are collected as they are printed."""

    def __init__(self, socket_path: Path, log_dir: Path):
        self.socket_path = socket_path
        self.stderr_path = log_dir / f"sink-{time.monotonic_ns()}.err"
        self.events: list[dict] = []
        self.cond = threading.Condition()
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [*TODOS_CLI, "serve", "--socket", str(socket_path), "--json"],
                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, cwd=REPO,
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.wait_event(lambda e: e["event"] == "serving", "the sink to listen")

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self.cond:
                self.events.append(json.loads(line))
                self.cond.notify_all()
        with self.cond:
            self.events.append({"event": "exited"})
            self.cond.notify_all()

    def wait_event(self, predicate: Callable[[dict], bool], what: str, timeout: float = 20.0) -> dict:
        def found():
            for event in self.events:
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
            out = []
            for e in self.events:
                if e["event"] == "upsert" and key in (None, e["key"]):
                    out.append(("upsert", e["key"], e["summary"]))
                elif e["event"] == "clear" and key in (None, e["key"]):
                    out.append(("clear", e["key"]))
            return out

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(15)
        self._reader.join(5)
        return self.proc.returncode


@pytest.fixture
def sink_factory(short_dir):
    """start(socket_path=None) -> Sink; every sink is stopped at teardown."""
    started: list[Sink] = []

    def start(socket_path: Path | None = None) -> Sink:
        sink = Sink(socket_path or short_dir / "agent.sock", short_dir)
        started.append(sink)
        return sink

    yield start
    for sink in started:
        sink.stop()


class FakeHarness:
    """A harness that misbehaves on purpose. `behave(n, request)` is called for the n-th request (from 0) and
    returns the bytes to answer (None: hang up without a word; b"": apply it, then hang up). Every request is recorded before that, so a
    test can wait until one has arrived while `behave` is still blocked.

    Why a fake: the real sink always answers `{"ok": true}` at once; slow, malformed and error replies and a
    hang-up mid-reply only come from a broken harness, which we have to play ourselves.
    """

    def __init__(self, path: Path, behave: Callable[[int, dict], bytes | None]):
        self.path = path
        self.behave = behave
        self.requests: list[dict] = []
        self.applied: list[dict] = []  # requests the harness applied (answered ok, or b"")
        self.cond = threading.Condition()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(16)
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            line = conn.makefile("rb").readline()
            if not line:
                return
            request = json.loads(line)
            with self.cond:
                n = len(self.requests)
                self.requests.append(request)
                self.cond.notify_all()
            answer = self.behave(n, request)
            if answer is not None and (answer == b"" or answer.startswith(b'{"ok":true}')):
                with self.cond:  # a harness applies, then answers: by the time the daemon reads ok, it is applied
                    self.applied.append(request)
                    self.cond.notify_all()
            if answer:
                try:
                    conn.sendall(answer)
                except OSError:
                    return

    def wait_requests(self, count: int, timeout: float = 20.0) -> list[dict]:
        return wait_on(self.cond, lambda: list(self.requests) if len(self.requests) >= count else None, timeout,
                       f"{count} request(s) at the fake harness")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.sock.shutdown(socket.SHUT_RDWR)
            self.sock.close()
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


@pytest.fixture
def fake_harness(short_dir):
    """start(behave, name="fake.sock") -> FakeHarness; closed at teardown."""
    made: list[FakeHarness] = []

    def start(behave: Callable[[int, dict], bytes | None], name: str = "fake.sock") -> FakeHarness:
        harness = FakeHarness(short_dir / name, behave)
        made.append(harness)
        return harness

    yield start
    for harness in made:
        harness.close()


@pytest.fixture
def make_todos(short_dir):
    """make(socket_path, source="bash", **knobs) -> TodoDelivery in short_dir/state; closed at teardown."""
    made: list[TodoDelivery] = []

    def make(socket_path: Path | None, source: str = "bash", **knobs: Any) -> TodoDelivery:
        knobs.setdefault("backoff_initial", 0.01)
        knobs.setdefault("backoff_max", 0.05)
        todos = TodoDelivery(source, short_dir / "state", socket_path, **knobs)
        made.append(todos)
        return todos

    yield make
    for todos in made:
        todos.close()

