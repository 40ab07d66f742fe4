"""The todo outbox on a real full disk (a small tmpfs) and under an operator's `rm -r`: what it
took is on disk, kept in room reserved ahead; what it cannot take it says, and writes once there is room."""

import logging
import shutil

from common.todos.outbox import ROOM, Outbox, read_journal


def _message(n: int, size: int = 600) -> dict:
    return {"op": "upsert", "key": f"t{n}", "summary": f"task {n}", "body": "x" * size}


def test_lines_land_in_the_reserved_room_while_the_disk_is_full(small_disk):
    box = Outbox(small_disk.root / "todos" / "bash")
    box.load()
    small_disk.fill()
    assert small_disk.free() < 4096
    count = (ROOM // 2) // 700  # lines that fit in half the room
    for n in range(count):
        box.save(n, f"t{n}", _message(n))
    box.drop("t0")
    assert not box.unsaved
    journal = read_journal(box.journal)
    assert sorted(journal) == sorted(f"t{n}" for n in range(1, count)), "a todo the outbox took is not on disk"


def test_what_does_not_fit_is_said_and_written_once_there_is_room(small_disk, caplog):
    box = Outbox(small_disk.root / "todos" / "bash")
    box.load()
    small_disk.fill()
    caplog.set_level(logging.ERROR)
    n = 0
    while not box.unsaved:
        box.save(n, f"t{n}", _message(n, 4000))
        n += 1
        assert n < 200, "the disk never filled"
    assert "pending todo(s) are kept in memory only, and a crash would lose them" in caplog.text
    small_disk.make_room()
    box.save(n, f"t{n}", _message(n))  # the next change rewrites the journal whole
    assert not box.unsaved
    assert sorted(read_journal(box.journal)) == sorted(f"t{i}" for i in range(n + 1))


def test_a_removed_outbox_is_made_again_from_memory(tmp_path, caplog):
    state = tmp_path / "state"
    box = Outbox(state / "todos" / "bash")
    box.load()
    box.save(1, "a", _message(1))
    box.save(2, "b", _message(2))
    assert not box.repair_if_removed()  # in place: one fstat, nothing done
    assert not box.looks_removed()
    shutil.rmtree(state / "todos")
    assert box.looks_removed()  # the lock-free check the daemons make after each answer
    caplog.set_level(logging.WARNING)
    assert box.repair_if_removed()
    assert not box.looks_removed()
    assert "was removed while the daemon ran: made again with the 2 pending todo(s)" in caplog.text
    assert (state / "todos" / "bash").stat().st_mode & 0o777 == 0o700
    box.save(3, "c", _message(3))
    assert sorted(read_journal(box.journal)) == ["a", "b", "c"]


def test_a_journal_descriptor_closed_meanwhile_counts_as_maybe_removed(tmp_path):
    """looks_removed runs without the delivery's lock: a descriptor another thread closed or replaced must send
    the caller to the locked check, never hide a removal."""
    import os

    box = Outbox(tmp_path / "state" / "todos" / "bash")
    box.load()
    box.save(1, "a", _message(1))
    fd = box._fd
    os.close(fd)  # as a concurrent rewrite would, between the read of _fd and the fstat
    assert box.looks_removed()
    box._fd = None  # closed for good: nothing to check
    assert not box.looks_removed()
