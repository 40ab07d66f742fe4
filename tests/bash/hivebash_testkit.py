"""Helpers for the bash daemon's tests (imported by tests/bash/conftest.py and the test modules)."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from common.config import BashSettings
from hivebash.processes import MARKER_ENV

HERE = Path(__file__).parent
REPO = HERE.parent.parent


class TodoRecorder:
    """Stands in for common.loose_ends.LooseEnds (duck-typed upsert/clear): records calls in order."""

    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()

    def upsert(self, key, summary, body, data=None):
        with self.lock:
            self.calls.append(("upsert", key, summary, body, data))

    def clear(self, key):
        with self.lock:
            self.calls.append(("clear", key))

    def for_key(self, key):
        with self.lock:
            return [c for c in self.calls if c[1] == key]


def settings(tmp_path, **overrides):
    base = dict(state_dir=tmp_path / "state", kill_grace=0.3, threads=8, max_inline_waits=4)
    base.update(overrides)
    return BashSettings(**base)


def marked_processes(marker_prefix=""):
    """Live (non-zombie) processes whose HIVE_BASH_TASK starts with `marker_prefix`."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            value = proc.environ().get(MARKER_ENV)
        except psutil.Error:
            continue
        if value is not None and value.startswith(marker_prefix) and proc.pid != os.getpid():
            found.append(proc.pid)
    return found


def wait_until(predicate, timeout=10.0, interval=0.02):
    """Poll a condition we cannot wait on directly (another process's state), with a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


class EngineProcess:
    """An engine in a real subprocess (tests/bash/engine_proc.py): a subreaper, like the daemon, that can
    be killed with SIGKILL. Speaks one JSON object per line on stdin/stdout."""

    def __init__(self, state_dir, **overrides):
        cfg = dict(state_dir=str(state_dir), kill_grace=0.3)
        cfg.update(overrides)
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "engine_proc.py"), json.dumps(cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
        )
        assert self.call({"op": "ping"}) == {"ok": True}

    def call(self, request):
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "engine process died"
        return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.call({"op": "shutdown"})
            except (AssertionError, BrokenPipeError, OSError):
                pass
            self.proc.stdin.close()
            self.proc.wait(10)


