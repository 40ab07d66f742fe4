"""When task records reach the disk: before the answer (`--fsync always`), or in a group flush soon after it
(`batched`). Observed through the flusher's `sync` seam (which file was flushed holding what, and when
relative to the answer), never by timing the disk."""

import json
import os
import subprocess
import threading

import pytest

from common.durability import ALWAYS, BATCHED, Flusher
from daemon_harness import VENV_BIN


class SyncRecorder:
    """Stands in for os.fsync/os.fdatasync: records the record each flushed descriptor holds, then flushes it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.flushed: list[dict] = []

    def __call__(self, fd: int) -> None:
        with open(f"/proc/self/fd/{fd}", "rb") as inode:  # the writer's descriptor is write-only
            record = json.loads(inode.read())
        with self.lock:
            self.flushed.append(record)
        os.fdatasync(fd)

    def states(self, task_id: str) -> list[str]:
        with self.lock:
            return [r["state"] for r in self.flushed if r["id"] == task_id]


def _recording(engine) -> SyncRecorder:
    recorder = SyncRecorder()
    engine.store.flusher.sync = recorder
    return recorder


def test_always_flushes_every_record_before_the_answer(make_engine):
    engine = make_engine(fsync=ALWAYS)
    recorder = _recording(engine)
    outcome = engine.run("echo hi", wait_seconds=30)
    task_id = outcome.view.task.id
    assert outcome.view.task.state == "done"
    # Both records the answer depends on were on the disk when run() returned: the pending one (before the
    # spawn) and the terminal one.
    states = recorder.states(task_id)
    assert states[0] == "pending" and states[-1] == "done", states


def test_batched_answers_first_and_flushes_every_record_within_the_window(make_engine):
    engine = make_engine(fsync=BATCHED, fsync_window=0.02)
    recorder = _recording(engine)
    ids = [engine.run(f"echo {i}", wait_seconds=30).view.task.id for i in range(5)]
    # Each record is in the page cache (readable) the moment the answer is given...
    for task_id in ids:
        assert json.loads(engine.store.path(task_id, "json").read_bytes())["state"] == "done"
    # ...and every one reaches the disk in a group flush (a pending record already replaced by then is not
    # flushed: test_a_replaced_record_is_not_flushed).
    assert engine.store.flusher.wait_flushed(10)
    for task_id in ids:
        assert recorder.states(task_id)[-1] == "done"


def test_a_replaced_record_is_not_flushed(tmp_path):
    """A record renamed over before its batch is flushed has no name left: only its successor is flushed, and
    both descriptors are closed."""
    flusher = Flusher(tmp_path, BATCHED, window=60)
    recorder = SyncRecorder()
    flusher.sync = recorder
    for state in ("pending", "done"):
        tmp = tmp_path / ".r.json.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, json.dumps({"id": "r", "state": state}).encode())
        flusher.before_rename(fd)
        os.replace(tmp, tmp_path / "r.json")
        flusher.release(fd)
    flusher.close()
    assert recorder.states("r") == ["done"]
    assert not [f for f in _open_files() if f.startswith(str(tmp_path))], "both descriptors are closed"


def test_batched_flushes_what_is_queued_at_shutdown(tmp_path):
    flusher = Flusher(tmp_path, BATCHED, window=60)  # a window that would outlast the test
    recorder = SyncRecorder()
    flusher.sync = recorder
    fd = os.open(tmp_path / "r.json", os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b'{"id": "r", "state": "done"}')
    flusher.before_rename(fd)
    assert recorder.flushed == [], "batched: nothing is flushed on the writer's path"
    flusher.release(fd)
    flusher.close()
    assert recorder.states("r") == ["done"]
    assert flusher.wait_flushed(0)


def test_a_failing_flush_is_logged_and_the_descriptor_closed(tmp_path, caplog):
    def broken(fd):
        raise OSError(5, "Input/output error")

    flusher = Flusher(tmp_path, BATCHED, window=0, sync=broken)
    fd = os.open(tmp_path / "r.json", os.O_WRONLY | os.O_CREAT, 0o600)
    flusher.release(fd)
    assert flusher.wait_flushed(10)
    assert str(tmp_path / "r.json") not in _open_files(), "the flusher closes it all the same"
    assert "Input/output error" in caplog.text
    flusher.close()


def _open_files() -> set[str]:
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the descriptor listdir itself used
            pass
    return found


def test_unknown_mode_is_refused_naming_the_knob(tmp_path):
    with pytest.raises(ValueError, match="fsync: must be one of batched, always"):
        Flusher(tmp_path, "sometimes")


@pytest.mark.parametrize("option,value", [("--fsync", "sometimes"), ("--fsync-window", "11")])
def test_bad_fsync_knobs_stop_the_daemon_naming_the_flag(tmp_path, option, value):
    done = subprocess.run([str(VENV_BIN / "hive-bash-daemon"), option, value, "--port", "0", "--state-dir", str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and option in done.stderr and "Traceback" not in done.stderr, done.stderr
