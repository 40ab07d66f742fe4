"""The real bash daemon with its state directory on a small real disk (a 2 MiB tmpfs), as an operator's bad day
goes: a record bigger than the free space, a task whose own output fills the disk, a kill -9 and a
restart on a full disk, `rm -r` of bash-tasks/ and todos/ under a running daemon.

Every answer must be true after the restart: a task answered `done` reads `done`, a refused `run` left
nothing torn behind, and every other task is found again. Under them all, every file is written whole
(common/disk/whole_files.py): `write(2)` takes part of the bytes on a nearly full disk, and the writer loops.
"""

import itertools
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest
from daemon_harness import start_daemon, wait_until
from kit.daemons_kit import BIN, running_record_written
from kit.gate import Gate
from kit.robust_kit import call_tool_raw, result_text, tool_result

from common.disk import whole_files
from common.todos.outbox import read_journal

# The full disk itself is under test here: no --max-state-bytes quota (its default, a share of this 2 MiB disk,
# would empty the outputs first; tests/bash/test_state_quota.py tests the quota).
WHOLE_DISK = ("--max-state-bytes", "0")


def _state(small_disk):
    return small_disk.root / "state"


def _flood(daemon, small_disk, gate_dir, name: str, flood: str) -> dict:
    """run(flood) waited on, its flood let out at a gate (off the small disk) once its running record is on
    disk: what the disk has room for at its end does not depend on how fast the record was written."""
    gate, record = Gate(gate_dir), _state(small_disk) / "bash-tasks" / f"{name}.json"
    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(daemon.call, "run", cmd=f"{gate.wait}; {flood}", name=name, wait_seconds=30)
        wait_until(lambda: running_record_written(record, daemon.pid) or call.done(), 20, "the running record")
        gate.open()
        return call.result(40)



@pytest.mark.slow
def test_a_record_bigger_than_the_free_space_is_refused_whole(bash_factory, small_disk):
    """Hole 1: a 12,288-byte prefix of a long record was renamed into place; the task was lost at the restart."""
    daemon = bash_factory(*WHOLE_DISK, socket=False, state_dir=_state(small_disk))
    for name in ("a", "b", "c"):
        assert daemon.call("run", cmd=f"echo {name}-ok", name=name, wait_seconds=20)["status"] == "done"
    small_disk.fill(leave=12 * 1024)
    result = daemon.call_result("run", {"cmd": ": " + "x" * 60_000 + "; echo long-ok", "name": "longrec",
                                        "wait_seconds": 20})
    assert result["isError"], result_text(result)
    assert "No space left on device" in result_text(result) and "cmd:" in result_text(result), result_text(result)
    tasks_dir = _state(small_disk) / "bash-tasks"
    assert not (tasks_dir / "longrec.json").exists(), "a refused run left a record"
    daemon.kill9()
    small_disk.make_room()
    daemon.start()
    assert {t["id"]: t["status"] for t in daemon.tasks()} == {"a": "done", "b": "done", "c": "done"}
    assert "skipping unreadable task record" not in daemon.daemon.log()
    assert daemon.call("run", cmd="echo after", wait_seconds=20)["status"] == "done"


@pytest.mark.slow
def test_an_end_answered_on_a_full_disk_survives_a_kill_9(bash_factory, small_disk, tmp_path):
    """Hole 2: the task's own output fills the disk; its end is recorded in the room reserved at its start, so
    the restart after a kill -9 reports what the answer said, and the answer says why its output is cut."""
    daemon = bash_factory(*WHOLE_DISK, socket=False, state_dir=_state(small_disk))
    answer = _flood(daemon, small_disk, tmp_path, "victim", "yes; echo after-yes")
    assert answer["status"] == "done" and answer["exit_code"] == 1, answer
    note = answer["note"]
    assert "the state disk is full" in note and "output may be cut short" in note, note
    assert small_disk.free() < 64 * 1024
    record = _state(small_disk) / "bash-tasks" / "victim.json"
    assert json.loads(record.read_text())["state"] == "done", "the answered end is not on disk"
    daemon.kill9()
    daemon.start()  # on the disk as full as it was
    after = daemon.call("status", id="victim")
    assert (after["status"], after["exit_code"], after["note"]) == ("done", 1, note), after
    refused = daemon.call_result("run", {"cmd": "echo no-room", "wait_seconds": 5})
    assert refused["isError"] and "No space left on device" in result_text(refused), result_text(refused)
    (_state(small_disk) / "bash-tasks" / "victim.out").unlink()  # the operator frees the disk
    assert daemon.call("run", cmd="echo room-again", wait_seconds=20)["status"] == "done"


@pytest.mark.slow
def test_a_task_that_succeeds_after_its_output_hit_the_full_disk_is_told(bash_factory, small_disk, tmp_path):
    """The note is not decided by a failing exit alone, or `yes || true` (its writes refused, exit 0) would not
    be told. Its output ends on a block's edge (the kernel refuses a write at the first page it has
    no room for), which makes the end look at the disk. An output on a block's edge on a disk with room gets no
    note: the edge only makes the end ask."""
    daemon = bash_factory(*WHOLE_DISK, socket=False, state_dir=_state(small_disk))
    edge = daemon.call("run", cmd="head -c 8192 /dev/zero", wait_seconds=20)
    assert (edge["status"], edge["exit_code"], edge["note"], edge["stdout"]["size"]) == ("done", 0, None, 8192), edge
    answer = _flood(daemon, small_disk, tmp_path, "quiet", "yes || true")
    assert answer["status"] == "done" and answer["exit_code"] == 0, answer
    note = answer["note"] or ""
    assert "the state disk is full" in note and "output may be cut short (No space left on device)" in note, answer
    assert answer["stdout"]["size"] % 4096 == 0 and small_disk.free() < 64 * 1024
    assert daemon.call("status", id="quiet")["note"] == note
    record = json.loads((_state(small_disk) / "bash-tasks" / "quiet.json").read_text())
    assert note in json.dumps(record), "the note is not in the saved end"
    (_state(small_disk) / "bash-tasks" / "quiet.out").unlink()


@pytest.mark.slow
def test_a_removed_bash_tasks_directory_is_made_again(bash_factory, tmp_path):
    daemon = bash_factory(socket=False)
    tasks_dir = daemon.state_dir / "bash-tasks"
    assert daemon.call("run", cmd="echo one", name="one", wait_seconds=20)["status"] == "done"
    running = daemon.call("run", cmd="sleep 300", name="long", wait_seconds=0)
    wait_until(lambda: daemon.call("status", id="long")["status"] == "running", 20, "the long task to run")
    # rm -rf until it is gone: the daemon may be making its spare file (after the last answer) meanwhile
    wait_until(lambda: shutil.rmtree(tasks_dir, ignore_errors=True) or not tasks_dir.exists(), 20,
               "bash-tasks/ to be removed")
    for name in ("two", "three"):  # the next run (named: its own files; unnamed: the spare was removed too)
        assert daemon.call("run", cmd=f"echo {name}", name=name, wait_seconds=20)["status"] == "done"
    assert daemon.call("run", cmd="echo unnamed", wait_seconds=20)["status"] == "done"
    assert tasks_dir.stat().st_mode & 0o777 == 0o700
    assert (tasks_dir / "two.out").read_text() == "two\n"
    assert daemon.daemon.log().count("bash-tasks")
    assert daemon.daemon.log().count("was removed while the daemon ran") == 1
    assert (tasks_dir / "long.json").exists(), "the record of a task still running was not written again"
    daemon.kill9()
    daemon.start()
    tasks = {t["id"]: t["status"] for t in daemon.tasks()}
    assert tasks["two"] == tasks["three"] == "done" and tasks["long"] == "interrupted", tasks
    assert running["id"] == "long"


@pytest.mark.slow
def test_a_removed_outbox_is_made_again_on_the_next_run(bash_factory):
    daemon = bash_factory(socket=False)
    daemon.call("run", cmd="sleep 0.3; echo late", name="late", wait_seconds=0)
    todos_dir = daemon.state_dir / "todos"
    journal = todos_dir / "bash" / "outbox.jsonl"
    wait_until(lambda: "late" in read_journal(journal), 20, "the late task's todo in the outbox")
    shutil.rmtree(todos_dir)
    daemon.call("run", cmd="echo next", name="next", wait_seconds=0)
    wait_until(lambda: journal.exists() and {"late", "next"} <= set(read_journal(journal)), 20,
               "the outbox made again with every pending todo")
    assert todos_dir.stat().st_mode & 0o777 == 0o700


@pytest.mark.slow
def test_both_daemons_start_and_answer_on_a_full_disk(bash_factory, small_disk, tmp_path):
    """A restart on a disk with no byte free (the daemon's own lock, outbox and records have no room): the
    daemons serve, and what cannot be done is refused with the reason."""
    state = _state(small_disk)
    state.mkdir()
    small_disk.fill()
    daemon = bash_factory(socket=False, state_dir=state)
    assert daemon.call("list")["total"] == 0
    refused = daemon.call_result("run", {"cmd": "echo hi", "wait_seconds": 5})
    assert refused["isError"] and "the state disk is full" in result_text(refused), result_text(refused)
    sub = start_daemon([str(BIN / "hive-subagent-daemon"), "--state-dir", str(small_disk.root / "sub"),
                        "--claude-bin", "/bin/true"], tmp_path)
    try:
        result = tool_result(call_tool_raw(sub.url, "status", {}, timeout=30))
        assert not result["isError"], result
    finally:
        sub.stop()
    assert "Traceback" not in daemon.daemon.log() + sub.log()



def test_short_writes_are_written_on_until_every_byte_is(tmp_path, monkeypatch):
    """os.write cut short, as a nearly full disk cuts it (no disk can be made to give short counts that then
    succeed, on cue): the real bytes go to a real file, only the counts are short, and of changing sizes."""
    real_write, sizes, counts = os.write, itertools.cycle([4095, 1, 777]), []

    def short_write(fd, data):
        written = real_write(fd, bytes(memoryview(data)[:next(sizes)]))
        counts.append(written)
        return written

    data = bytes(range(256)) * 200  # 51,200 bytes
    monkeypatch.setattr(os, "write", short_write)
    fd = os.open(tmp_path / "direct", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        whole_files.write_all(fd, data)
    finally:
        os.close(fd)
    whole_files.replace_whole(str(tmp_path / "record"), data, str(tmp_path / "record.tmp"))
    monkeypatch.undo()
    assert (tmp_path / "direct").read_bytes() == data
    assert (tmp_path / "record").read_bytes() == data and not (tmp_path / "record.tmp").exists()
    assert sum(counts) == 2 * len(data) and len(counts) > 2 * 30, counts  # every byte went through it
