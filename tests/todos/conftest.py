"""Fixtures for the todo tests: short socket directories, TodoDelivery instances, the real `hive-todos serve`
as a subprocess, and an in-process fake harness for the misbehaviours the real sink never shows (slow, malformed,
error replies, hanging up mid-reply)."""

import json
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kit.sink import Sink, wait_on

from common.todos.delivery import TodoDelivery

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def short_dir():
    """A directory under /tmp whose paths stay well below the 108-byte Unix socket limit."""
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="todos-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


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
    returns the bytes to answer (None: hang up without a word; b"": apply it, then hang up). Every request is
    recorded before that, so a test can wait until one has arrived while `behave` is still blocked.

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

