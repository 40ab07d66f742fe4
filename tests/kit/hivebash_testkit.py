"""Helpers for the bash daemon's tests (imported by tests/bash/conftest.py and the test modules)."""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest
from daemon_harness import wait_until
from todo_recorder import TodoRecorder  # noqa: F401 - re-exported for the bash tests

from common.config import BashSettings
from common.disk.whole_files import punch_hole
from hivebash.disk.output_limit import line_end_after, line_start_at_or_before
from hivebash.processes.search import MARKER_ENV

HERE = Path(__file__).parent
REPO = HERE.parent.parent


def settings(tmp_path, **overrides):
    base = dict(state_dir=tmp_path / "state", kill_grace=0.3, threads=8, max_inline_waits=4)
    base.update(overrides)
    return BashSettings(**base)


def task_ids(engine):
    """The ids the engine's registry holds."""
    with engine.registry.locked() as tasks:
        return [e.id for e in tasks.entries()]


def shell_exited(engine, task_id):
    """True while the task's shell has exited and its worker looks at or stops what it left."""
    with engine.registry.locked() as tasks:
        return tasks.get(task_id).task.state in ("exited", "sweeping")


def ended_in_memory(engine, task_id):
    """The task's end is decided (its terminal record may still be being written)."""
    with engine.registry.locked() as tasks:
        return tasks.get(task_id).task.ended


def inline_waiters(engine, task_id):
    """How many calls wait inline for the task's end now: once one counts, its answer will say the task ended
    during it (the moment a test may let a gated task end)."""
    with engine.registry.locked() as tasks:
        return tasks.get(task_id).inline_waiters


def ended_mid_wait(engine, task_id, gate, call):
    """`call()`, a call that waits inline on task_id, answered after `gate` (the task's) was opened while it
    waited: the task ends during the call however slow the machine is."""
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(call)
        wait_until(lambda: inline_waiters(engine, task_id) or answer.done(), 10, f"a call waiting on {task_id}")
        gate.open()
        return answer.result(30)


def wait_idle(engine, timeout):
    """Wait until no task is pending or running and every end is on disk."""
    with engine.registry.locked() as tasks:
        return tasks.wait(lambda: all(e.task.terminal for e in tasks.entries()), timeout)


def punch_lines(path, start, end):
    """Free the lines of `path` from the one holding `start` to the end of the one holding `end`, as the output
    guard frees them (a hole; the test is skipped where the filesystem cannot punch one); returns that range."""
    fd = os.open(path, os.O_RDWR)
    try:
        first, last = line_start_at_or_before(fd, start), line_end_after(fd, end)
        try:
            punch_hole(fd, first, last - first)
        except OSError as exc:
            pytest.skip(f"this filesystem cannot punch holes ({exc.strerror})")
    finally:
        os.close(fd)
    return first, last


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


class EngineProcess:
    """An engine in a real subprocess (tests/kit/engine_proc.py): a subreaper, like the daemon, that can
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


