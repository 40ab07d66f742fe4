"""Room on the state disk for a task's end: the disk blocks its terminal record will need, reserved when the
task starts (common/whole_files.reserve), so the end is recorded even once the task's own output has filled
the disk (issue 25). Also whether the disk is full now, for a task's note.

A reservation is whole pages: a typical record (under 3 KiB with its end) takes one, as it would anyway.
"""

from __future__ import annotations

import errno
import logging
from typing import NamedTuple

from common.whole_files import free_bytes, reserve

log = logging.getLogger(__name__)

PAGE = 4096
END_ROOM = 1024  # bytes a terminal record may add to the pending one (result, rusage, pid, times, a note)
SPARE_END_ROOM = 2 * PAGE  # reserved with a spare: the end of a `cmd` up to ~7 KB needs no reservation on the path
FULL_BELOW = 64 * 1024  # free bytes under which the disk counts as full (a task's writes to it may have failed)


class Temp(NamedTuple):
    """A record's temp file, made ahead: open for writing, its path, and the bytes reserved for it on disk."""

    fd: int
    path: str
    reserved: int = 0


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
