"""--max-output-bytes with real floods on real filesystems: `yes`, `cat /dev/zero | tr`, numbered lines and a tty
flood on a small tmpfs, measured by their blocks on disk while they run; and a filesystem that cannot free a
range (ramfs), where the task is stopped at the limit instead."""

import os
import subprocess
import time
from pathlib import Path

import pytest
from kit.hivebash_testkit import wait_until
from small_disk import mount_ramfs, mount_small_disk, unmount

from hivebash.disk.output_limit import FAST_RATE, LOOK_MIN

LIMIT = 1 << 20
DISK = 256 << 20
# A writer the looks can follow (a verbose build or test loop: tens of MB/s) finds at most what it writes between
# two looks past the trigger: LOOK_MIN at FAST_RATE, twice over for a loaded box.
SLACK = 2 * int(FAST_RATE * LOOK_MIN)
# `yes` (~1.5 GB/s) outruns every look: it overshoots by what it writes while a look waits for a core and for the
# file's lock (up to ~30 ms on a loaded 2-core box: ~50 MB), and never fills a disk that has that room.
FLOOD_SLACK = 96 << 20
STEADY = ("python3 -c 'import sys, time\nfor i in range(10**6):\n    sys.stdout.write(f\"{i:08d}\" * 8191 + "
          "\"\\n\"); sys.stdout.flush(); time.sleep(0.002)'")  # ~64 KiB each 2 ms: ~25 MB/s


@pytest.fixture
def disk(tmp_path):
    mounted = mount_small_disk(tmp_path / "disk", DISK)
    yield mounted
    unmount(mounted)


def _engine(make_engine, root: Path, **overrides):
    return make_engine(state_dir=root / "state", max_output_bytes=LIMIT, **overrides)


def _blocks(path: Path) -> int:
    try:
        return os.stat(path).st_blocks * 512
    except FileNotFoundError:
        return 0


def _sample(path: Path, seconds: float, free=None) -> tuple[int, int]:
    """The most blocks the file had, and the least free space the disk had, over `seconds` of samples."""
    most, least_free = 0, 1 << 62
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        most = max(most, _blocks(path))
        if free is not None:
            least_free = min(least_free, free())
        time.sleep(0.001)
    return most, least_free


def _task(engine, tid):
    with engine.registry.locked() as tasks:
        return tasks.get(tid).task


def _flood(engine, disk, cmd: str, seconds: float = 1.5, **run) -> tuple[str, int, int]:
    tid = engine.run(cmd, wait_seconds=0, **run).view.task.id
    out = disk.root / "state" / "bash-tasks" / f"{tid}.out"
    wait_until(lambda: _task(engine, tid).dropped or _task(engine, tid).ended, 20, "the first dropped range")
    most, least_free = _sample(out, seconds, disk.free)
    engine.kill(tid, force=True, wait_seconds=10)
    return tid, most, least_free


def test_a_steady_writer_stays_under_the_limit_plus_a_small_slack(disk, make_engine):
    engine = _engine(make_engine, disk.root)
    _, most, _ = _flood(engine, disk, STEADY, seconds=2.0)
    assert most <= LIMIT + SLACK, f"{most} bytes on disk for a {LIMIT}-byte limit"


@pytest.mark.parametrize("cmd", ["yes", "cat /dev/zero | tr '\\0' x"])
def test_a_flood_never_fills_the_disk_and_ends_under_the_limit(disk, make_engine, cmd):
    engine = _engine(make_engine, disk.root)
    tid, most, least_free = _flood(engine, disk, cmd)
    assert most <= LIMIT + FLOOD_SLACK, f"{most} bytes on disk for a {LIMIT}-byte limit"
    assert least_free > DISK - LIMIT - FLOOD_SLACK - (16 << 20)
    view = engine.status(tid).view
    task = view.task
    assert task.state == "killed" and task.result.note == "killed by request (SIGKILL)"
    start, end, limit = task.dropped["stdout"]
    size = os.path.getsize(disk.root / "state" / "bash-tasks" / f"{tid}.out")
    assert limit == LIMIT and 0 < start <= LIMIT // 8 and size - end <= LIMIT, task.dropped
    assert _blocks(disk.root / "state" / "bash-tasks" / f"{tid}.out") <= LIMIT
    text = view.output.text
    assert "\0" not in text and "\\x00" not in text
    assert "written" in text and "kept" in text and "dropped from the middle" in text, text[:300]


def test_grep_and_windows_name_the_right_lines_across_the_gap(disk, make_engine):
    engine = _engine(make_engine, disk.root)
    rows = 1_500_000  # ~11 MB of numbered lines
    done = engine.run(f"seq 1 {rows}", wait_seconds=30).view
    assert done.task.state == "done" and "stdout" in (done.task.dropped or {}), done.task
    start, end, _ = done.task.dropped["stdout"]
    out = disk.root / "state" / "bash-tasks" / f"{done.task.id}.out"
    data = out.read_bytes()
    head_rows = data[:start].count(b"\n")
    first_after = int(data[end:].split(b"\n", 1)[0])
    assert first_after > head_rows + 1
    assert data[:start].endswith(b"\n%d\n" % head_rows)  # whole lines on both sides
    grep = engine.status(done.task.id, grep=rf"^({head_rows}|{first_after + 1}|{rows})$").view
    text = grep.output.text
    assert f"stdout:{head_rows}: {head_rows}\n" in text, text  # before the gap: exact
    assert f"stdout:~{head_rows + 3}: {first_after + 1}\n" in text, text  # after: counted from the gap, marked
    assert "counted from the gap" in text
    window = engine.status(done.task.id, from_line=head_rows, max_lines=3).view.output.text
    lines = window.splitlines()[1:]
    assert lines[0] == f"{head_rows}: {head_rows}" and "dropped from the middle" in lines[1], window
    assert lines[2] == f"~{head_rows + 2}: {first_after}", window


def test_a_tty_task_flooding_its_terminal_is_kept_under_the_limit(disk, make_engine):
    engine = _engine(make_engine, disk.root)
    tid, most, _ = _flood(engine, disk, "yes tty-flood", stdin="tty")
    assert most <= LIMIT + FLOOD_SLACK, most
    view = engine.status(tid).view
    assert "stdout" in (view.task.dropped or {}) and "\\x00" not in view.output.text
    assert "tty-flood\ntty-flood\n" in view.output.text


def test_where_no_range_can_be_freed_the_task_is_stopped_at_the_limit(make_engine, tmp_path):
    root = mount_ramfs(tmp_path / "ramfs")
    try:
        engine = _engine(make_engine, root)
        # bounded (ramfs has no size limit): it ends by itself at 200 MB if the stop never came
        answer = engine.run("head -c 200000000 /dev/zero", wait_seconds=30).view
        assert answer.task.state == "killed", answer.task
        note = answer.task.result.note
        assert "stdout reached --max-output-bytes 1.0MiB" in note and "cannot free" in note, note
        size = os.path.getsize(root / "state" / "bash-tasks" / f"{answer.task.id}.out")
        # head of /dev/zero into ramfs is a flood like `yes`: under load it wrote 21 MB past the limit before the
        # look that stopped it came (its first look alone comes LOOK_MIN after the spawn: ~10 MB at 2 GB/s)
        assert LIMIT <= size <= LIMIT + FLOOD_SLACK, size
        assert not answer.task.dropped
    finally:
        subprocess.run(["umount", "-l", str(root)], capture_output=True)


def _open_here(path: Path) -> bool:
    """Whether this process (the daemon's engine runs in it) holds a descriptor of `path`."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                return True
        except OSError:
            continue
    return False


def test_a_file_under_the_trigger_is_looked_at_without_being_opened(disk, make_engine):
    engine = _engine(make_engine, disk.root)
    tid = engine.run("echo start; sleep 30", wait_seconds=0).view.task.id
    out = disk.root / "state" / "bash-tasks" / f"{tid}.out"
    watched = next(w for w in engine.rooms.lifecycle.guard._watched[id(_task(engine, tid))][1]
                   if w.stream == "stdout")
    wait_until(lambda: watched.size > 0, 10, "the guard's look at the task's stdout")
    assert watched.fd is None and not _open_here(out)
    # past the trigger it is opened, and its middle freed
    with open(out, "ab") as f:
        f.writelines(b"x" * (LIMIT // 64) + b"\n" for _ in range(64))
    wait_until(lambda: _task(engine, tid).dropped, 10, "the middle freed once the file passed the trigger")
    assert watched.fd is not None and _open_here(out)
    engine.kill(tid, force=True)
