"""When task records reach the disk: before the answer (`--fsync always`), or in a group flush soon after it
(`batched`). Observed through the flusher's `sync` seam (which file was flushed holding what, and when
relative to the answer), never by timing the disk."""

import json
import os
import subprocess
import threading

import pytest
from daemon_harness import VENV_BIN, wait_until

from common.disk.durability import ALWAYS, BATCHED, Flusher


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
    wait_until(lambda: all(recorder.states(t)[-1:] == ["done"] for t in ids), 10, "every record's group flush")
    for task_id in ids:
        assert recorder.states(task_id)[-1] == "done"


def test_a_replaced_record_is_not_flushed(tmp_path):
    """A batch flushes each path once: a record renamed over before its batch is flushed is not, its successor
    is, and both descriptors are closed."""
    flusher = Flusher(tmp_path, BATCHED, window=60)
    recorder = SyncRecorder()
    flusher.sync = recorder
    for state in ("pending", "done"):
        tmp = tmp_path / ".r.json.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, json.dumps({"id": "r", "state": state}).encode())
        flusher.before_rename(fd)
        os.replace(tmp, tmp_path / "r.json")
        flusher.release(fd, str(tmp_path / "r.json"))
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
    ticket = flusher.release(fd, str(tmp_path / "r.json"))
    flusher.close()
    assert recorder.states("r") == ["done"]
    assert flusher.reached_disk(ticket)


def test_a_failing_flush_is_logged_and_the_descriptor_closed(tmp_path, caplog):
    def broken(fd):
        raise OSError(5, "Input/output error")

    flusher = Flusher(tmp_path, BATCHED, window=0, sync=broken)
    fd = os.open(tmp_path / "r.json", os.O_WRONLY | os.O_CREAT, 0o600)
    ticket = flusher.release(fd, str(tmp_path / "r.json"))
    wait_until(lambda: flusher.reached_disk(ticket), 10, "the flusher to get past the failed flush")
    assert str(tmp_path / "r.json") not in _open_files(), "the flusher closes it all the same"
    assert "Input/output error" in caplog.text
    flusher.close()


# -- large batches: one `sync --data` process ---------------------------------------------------------------
# Which files a real fdatasync reached cannot be observed from here; a stand-in `sync` records what it was asked
# to flush (its arguments, and what each file held when it ran), the way SyncRecorder does in-process.

FAKE_SYNC = """#!/usr/bin/env bash
{ printf '%s\\n' "$*"; for f in "$@"; do [[ -f $f ]] && cat "$f" && echo; done; } >> "$0.log"
exit 0
"""


def _batch_of_records(flusher: Flusher, directory, count: int) -> tuple[list[str], int]:
    """`count` records released to the flusher: their paths and the last one's ticket (Flusher.reached_disk)."""
    paths, ticket = [], 0
    for i in range(count):
        path = str(directory / f"r{i}.json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, json.dumps({"id": f"r{i}", "state": "done"}).encode())
        ticket = flusher.release(fd, path)
        paths.append(path)
    return paths, ticket


def _fake_tool(tmp_path, body: str = FAKE_SYNC):
    tool = tmp_path / "bin" / "sync"
    tool.parent.mkdir()
    tool.write_text(body)
    tool.chmod(0o700)
    return tool


def test_a_large_batch_is_flushed_by_one_sync_process(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    tool = _fake_tool(tmp_path)
    flusher = Flusher(records, BATCHED, window=60, tool=str(tool))
    paths, last = _batch_of_records(flusher, records, 12)
    flusher.close()
    log = (tool.parent / "sync.log").read_text().splitlines()
    assert log[0] == " ".join(["--data", "--", *paths, str(records)]), "one process, every path, then the directory"
    assert sum('"state": "done"' in line for line in log) == 12
    assert flusher.reached_disk(last)
    assert not [f for f in _open_files() if f.startswith(str(records))]


def test_a_small_batch_is_flushed_in_process(tmp_path):
    tool = _fake_tool(tmp_path)
    flusher = Flusher(tmp_path, BATCHED, window=60, tool=str(tool))
    _batch_of_records(flusher, tmp_path, 3)
    flusher.close()
    assert not (tool.parent / "sync.log").exists()


def test_the_real_sync_flushes_a_large_batch_without_complaint(tmp_path, caplog):
    flusher = Flusher(tmp_path, BATCHED, window=60)
    if flusher.tool is None:
        pytest.skip("no `sync` (coreutils) on PATH: the daemon flushes file by file")
    paths, last = _batch_of_records(flusher, tmp_path, 10)
    os.unlink(paths[0])  # removed before its flush (retention): no error
    flusher.close()
    assert flusher.reached_disk(last)
    assert "flush" not in caplog.text


def test_a_failing_sync_process_is_logged(tmp_path, caplog):
    tool = _fake_tool(tmp_path,
                      "#!/usr/bin/env bash\necho \"sync: error syncing '$3': Input/output error\" >&2\nexit 1\n")
    flusher = Flusher(tmp_path, BATCHED, window=60, tool=str(tool))
    _, last = _batch_of_records(flusher, tmp_path, 9)
    flusher.close()
    assert flusher.reached_disk(last)
    assert "Input/output error" in caplog.text


def test_a_sync_tool_that_cannot_run_falls_back_to_file_by_file(tmp_path, caplog):
    tool = _fake_tool(tmp_path)
    flusher = Flusher(tmp_path, BATCHED, window=60, tool=str(tool))
    tool.unlink()  # gone after start (a package upgrade, say)
    _, last = _batch_of_records(flusher, tmp_path, 9)
    flusher.close()  # flushes through os.fdatasync in this process once the tool fails
    assert flusher.tool is None and "flushing them one by one" in caplog.text
    assert flusher.reached_disk(last)


def test_a_sync_tool_that_cannot_run_leaves_every_chunk_to_file_by_file(tmp_path, caplog, monkeypatch):
    """A batch above TOOL_MAX_PATHS goes to the tool in chunks: once it fails to run, the later chunks are
    flushed here too, and the flusher's thread lives on."""
    import common.disk.durability as durability

    monkeypatch.setattr(durability, "TOOL_MAX_PATHS", 9)
    tool = _fake_tool(tmp_path)
    flusher = Flusher(tmp_path, BATCHED, window=60, tool=str(tool))
    tool.unlink()
    _, last = _batch_of_records(flusher, tmp_path, 20)  # three chunks
    flusher.close()
    assert flusher.reached_disk(last), "every chunk was flushed"
    assert caplog.text.count("flushing them one by one") == 1 and "Traceback" not in caplog.text


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


@pytest.mark.slow
@pytest.mark.parametrize("option,value", [("--fsync", "sometimes"), ("--fsync-window", "11")])
def test_bad_fsync_knobs_stop_the_daemon_naming_the_flag(tmp_path, option, value):
    done = subprocess.run([str(VENV_BIN / "hive-bash-daemon"), option, value, "--port", "0", "--state-dir",
                           str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and option in done.stderr and "Traceback" not in done.stderr, done.stderr


# -- freeing replaced records off the caller's path ----------------------------------------------------------
# On ext4 with `discard` and no journal, the last reference to a file with allocated blocks trims them before
# the syscall returns (~1-2 ms here): a rename over a flushed record paid that on the path of every answer
# to a task that ran longer than a flush window. The store now holds such a record (O_PATH) across the rename
# and the flusher's thread drops the reference.

class CloseRecorder:
    """Stands in for Flusher.close_later: notes the inode each handed descriptor holds, then closes it."""

    def __init__(self):
        self.held: list[os.stat_result] = []

    def __call__(self, fd: int) -> None:
        self.held.append(os.fstat(fd))
        os.close(fd)


def _store_with_recorder(tmp_path, mode, window=60):
    from hivebash.disk.store import TaskStore

    store = TaskStore(tmp_path / "state", fsync=mode, fsync_window=window)
    closes = CloseRecorder()
    store.flusher.close_later = closes
    return store, closes


def _save(store, task_id, state):
    store.save_dict(task_id, {"id": task_id, "state": state})
    return os.stat(store.path(task_id, "json"))


def test_a_first_record_replaced_before_its_flush_is_not_held(tmp_path):
    """It owns no blocks yet (delayed allocation): no extra syscall on the path of a quick task."""
    store, closes = _store_with_recorder(tmp_path, BATCHED)
    _save(store, "t", "pending")
    _save(store, "t", "done")
    assert closes.held == []
    store.flusher.close()


def test_a_flushed_record_is_freed_by_the_flusher_not_by_the_rename(tmp_path):
    store, closes = _store_with_recorder(tmp_path, BATCHED, window=0)
    recorder = SyncRecorder()
    store.flusher.sync = recorder
    pending = _save(store, "t", "pending")
    wait_until(lambda: recorder.states("t") == ["pending"], 10, "the pending record's flush")
    # the flusher counts the record as on the disk only once its whole batch (and the directory) is flushed,
    # after the sync the recorder saw: the next save must come after that, or it rightly holds nothing
    wait_until(lambda: store.flusher.reached_disk(store._written["t"]), 10, "the flush to be counted")
    _save(store, "t", "done")
    assert [(s.st_ino, s.st_nlink) for s in closes.held] == [(pending.st_ino, 0)], \
        "the replaced record was held across the rename, its last reference handed to the flusher"
    store.flusher.close()


def test_a_record_that_replaced_another_is_held_even_unflushed(tmp_path):
    """ext4's auto_da_alloc allocates the blocks of a file renamed over another at the rename."""
    store, closes = _store_with_recorder(tmp_path, BATCHED)
    _save(store, "t", "pending")
    running = _save(store, "t", "running")
    _save(store, "t", "done")
    assert [s.st_ino for s in closes.held] == [running.st_ino]
    store.flusher.close()


def test_always_holds_every_replaced_record(tmp_path):
    store, closes = _store_with_recorder(tmp_path, ALWAYS)
    pending = _save(store, "t", "pending")
    _save(store, "t", "done")
    assert [s.st_ino for s in closes.held] == [pending.st_ino]


def test_a_record_loaded_at_start_is_held_when_replaced(tmp_path):
    from hivebash.disk.store import TaskStore
    from hivebash.tasks import task as t
    from hivebash.tasks.record import record_of

    first = TaskStore(tmp_path / "state", fsync=BATCHED, fsync_window=60)
    first.save_dict("t", record_of(t.Task(id="t", cmd="true", cwd="/", marker="t:n", seq=1, submitted_at=1.0)))
    first.flusher.close()
    store, closes = _store_with_recorder(tmp_path, BATCHED)
    before = os.stat(store.path("t", "json"))
    assert [x.id for x in store.load_all()] == ["t"]
    _save(store, "t", "interrupted")
    assert [s.st_ino for s in closes.held] == [before.st_ino]
    store.flusher.close()


def test_a_reused_name_leaves_the_old_files_to_the_flusher(tmp_path):
    store, closes = _store_with_recorder(tmp_path, BATCHED)
    for fd in store.prepare("t"):
        os.close(fd)
    old = {kind: os.stat(store.path("t", kind)).st_ino for kind in ("out", "err")}
    old["json"] = _save(store, "t", "done").st_ino
    for fd in store.prepare("t"):  # the name reused: fresh files
        os.close(fd)
    assert sorted(s.st_ino for s in closes.held) == sorted(old.values())
    assert all(s.st_nlink == 0 for s in closes.held)
    assert not store.path("t", "json").exists()
    store.flusher.close()


def test_close_later_closes_in_the_flusher_thread_and_at_close(tmp_path):
    flusher = Flusher(tmp_path, BATCHED, window=0.05)
    first = os.open(tmp_path / "a", os.O_WRONLY | os.O_CREAT, 0o600)
    flusher.close_later(first)
    # Closed with the next batch (within a window), away from the call that handed it over.
    wait_until(lambda: str(tmp_path / "a") not in _open_files(), 10, "the flusher's thread to close it")
    always = Flusher(tmp_path, ALWAYS, window=60)
    second = os.open(tmp_path / "b", os.O_WRONLY | os.O_CREAT, 0o600)
    always.close_later(second)
    always.close()
    flusher.close()
    assert not [f for f in _open_files() if f.startswith(str(tmp_path))]
