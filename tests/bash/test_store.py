"""Records on disk (atomic, 0600/0700, recoverable) and output tails (cheap, character-safe, binary-safe)."""

import json
import os
import stat

import pytest

from hivebash.disk.store import TaskStore
from hivebash.tasks import task as t
from hivebash.tasks.record import record_of


def make(task_id="a", seq=1):
    return t.Task(id=task_id, cmd="echo hi", cwd="/", marker=f"{task_id}:n", seq=seq, submitted_at=100.0 + seq)


def test_dirs_0700_files_0600_and_atomic_records(tmp_path):
    store = TaskStore(tmp_path / "state")
    for fd in store.prepare("a"):
        os.close(fd)
    store.save_dict("a", record_of(make()))
    assert stat.S_IMODE(os.stat(store.dir).st_mode) == 0o700
    for kind in ("out", "err", "json"):
        assert stat.S_IMODE(os.stat(store.path("a", kind)).st_mode) == 0o600
    assert sorted(p.name for p in store.dir.iterdir()) == ["a.err", "a.json", "a.out"]  # no temp left behind
    assert json.loads(store.path("a", "json").read_text())["state"] == "pending"


def test_load_all_orders_by_submission_and_skips_bad_records(tmp_path):
    store = TaskStore(tmp_path)
    store.save_dict("b", record_of(make("b", 2)))
    store.save_dict("a", record_of(make("a", 1)))
    (store.dir / "c.json").write_text("{torn")
    (store.dir / "d.json").write_text(json.dumps(record_of(make("e"))))  # id does not match file name
    (store.dir / ".a.json.tmp").write_text("half")
    assert [x.id for x in store.load_all()] == ["a", "b"]
    assert not (store.dir / ".a.json.tmp").exists()
    assert (store.dir / "c.json").exists()  # kept for the operator


def test_ids_are_checked_before_touching_paths(tmp_path):
    store = TaskStore(tmp_path)
    for bad in ("..", "../x", "A", "a/b", "x" * 64, ""):
        with pytest.raises(ValueError):
            store.path(bad, "out")


def test_prepare_replaces_old_files_and_old_writers_keep_their_own_file(tmp_path):
    store = TaskStore(tmp_path)
    out, err = store.prepare("a")
    os.write(out, b"old run\n")
    again = store.open_outputs("a")
    os.write(again[1], b"old error\n")
    new_out, new_err = store.prepare("a")  # name reused
    os.write(out, b"still the old file\n")
    os.write(again[0], b"so is this\n")
    os.write(new_out, b"new run\n")
    for fd in (out, err, *again, new_out, new_err):
        os.close(fd)
    assert store.path("a", "out").read_bytes() == b"new run\n"
    assert store.path("a", "err").read_bytes() == b""
