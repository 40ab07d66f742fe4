"""Room on the state disk for a task's end: the disk blocks its terminal record will need, reserved when the
task starts (common/disk/whole_files.reserve), so the end is recorded even once the task's own output has
filled the disk. Also whether the disk is full now, and whether a task's output may have lost writes to
it, for the task's note.

An output that lost a write for want of room ends on a block's edge: the kernel takes a write a page or block
at a time and refuses it at the first one it has no room for (tmpfs: a page; ext4, xfs: a 4 KiB block;
measured with writes of 1 byte to 64 KiB, `yes`, `head -c`). So any other size says its last write was taken
whole (a refused one before it was followed by room freed), and only a task that failed or left an output on a
block's edge costs the one statvfs that tells whether the disk is full (a 4 KiB-aligned output of a task that
succeeded is rare: an unnamed `run` on a healthy disk adds no syscall).

A reservation is whole pages: a typical record (under 3 KiB with its end) takes one, as it would anyway.
"""

from __future__ import annotations

import errno
import logging
import os
from typing import NamedTuple

from common.disk.whole_files import free_bytes, reserve

log = logging.getLogger(__name__)

PAGE = 4096
END_ROOM = 1024  # bytes a terminal record may add to the pending one (result, rusage, pid, times, a note)
SPARE_END_ROOM = 2 * PAGE  # reserved with a spare: the end of a `cmd` up to ~7 KB needs no reservation on the path
FULL_BELOW = 64 * 1024  # free bytes under which the disk counts as full (a task's writes to it may have failed)
BLOCK_EDGE = 4096  # the unit a refused write leaves an output at (a page; the usual file system block)


class Temp(NamedTuple):
    """A record's temp file, made ahead: open for writing, its path, and the bytes reserved for it on disk."""

    fd: int
    path: str
    reserved: int = 0


def output_sizes(paths: dict[str, str]) -> dict[str, int]:
    """Each output's size now (one lstat each; a missing file counts as empty)."""
    sizes = {}
    for stream, path in paths.items():
        try:
            sizes[stream] = os.stat(path, follow_symlinks=False).st_size
        except FileNotFoundError:
            sizes[stream] = 0
    return sizes


def on_block_edge(sizes: dict[str, int]) -> bool:
    """Whether an output may have lost its last write for want of room: it ends on a block's edge (an empty one
    is not asked about: most tasks write nothing to stderr, and a task whose every write was refused is not
    told apart from one that wrote nothing)."""
    return any(size and size % BLOCK_EDGE == 0 for size in sizes.values())


def end_need(pending_bytes: int) -> int:
    """The bytes to reserve for the end of a task whose pending record has `pending_bytes`."""
    return -(-(pending_bytes + END_ROOM) // PAGE) * PAGE


class EndRoom:
    """Reservations on one directory's file system; it learns once whether that file system can make them."""

    def __init__(self, directory: str):
        self.directory = directory
        self.can_reserve = True  # False where the file system keeps no blocks ahead (EOPNOTSUPP)

    def ensure(self, end: Temp, need: int) -> Temp:
        """`end` with at least `need` bytes reserved (one fallocate, only when it has less); raises ENOSPC."""
        if not self.can_reserve or end.reserved >= need:
            return end
        try:
            reserve(end.fd, need)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise
            log.warning("the file system of %s keeps no disk blocks ahead (%s): a task's end may not be saved "
                        "once the disk is full", self.directory, exc.strerror)
            self.can_reserve = False
            return end
        return end._replace(reserved=need)

    def disk_full(self) -> int | None:
        """The free bytes of the disk when it is full (below FULL_BELOW), else None. One statvfs."""
        free = free_bytes(self.directory)
        return free if free < FULL_BELOW else None
