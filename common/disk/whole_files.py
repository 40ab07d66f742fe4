"""Writing the daemons' files whole or not at all, and keeping room on the disk for what must be written later.

Every file a daemon writes (task records, the todo outbox, the transcript index, the ready file) goes through
`write_all`: `write(2)` may take only part of the bytes on a nearly full disk, and a record whose tail is
missing, once renamed into place, is a torn record (a 12,288-byte prefix, say) that a restart skips as
unreadable, and the task is lost. `write_all` loops until every byte is written or raises
the OSError that stopped it (ENOSPC); `replace_whole` writes a temp file that way and renames it into place
only once it is whole, so a reader finds the old file or the new one, never a torn one.

`reserve` allocates disk blocks for a file ahead of the bytes (fallocate with FALLOC_FL_KEEP_SIZE: the file's
size does not change, so an empty temp file stays empty). A later write into that room needs no new blocks,
so it succeeds on a disk that has filled up meanwhile: that is how a task's end is recorded after its own
output filled the disk (hivebash/disk/store.py), and how the outbox keeps lines while the disk is full.
`punch_hole` is the reverse: it frees the blocks of a range, keeping the size and every offset (how a task's
output past --max-output-bytes loses its middle: hivebash/disk/output_limit.py).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os

from common.disk.safe_files import create_fresh

log = logging.getLogger(__name__)

_KEEP_SIZE = 0x01  # FALLOC_FL_KEEP_SIZE (linux/falloc.h)
_PUNCH_HOLE = 0x02  # FALLOC_FL_PUNCH_HOLE: goes with KEEP_SIZE
_libc = ctypes.CDLL(None, use_errno=True)  # a CDLL call releases the GIL while it runs
_fallocate = _libc.fallocate
_fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
_fallocate.restype = ctypes.c_int


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte of `data` at the descriptor's offset, or raise the OSError that stopped it. One
    syscall when the disk takes it all, which is every time but on a nearly full disk."""
    written = os.write(fd, data)
    if written == len(data):
        return
    view = memoryview(data)[written:]
    while view:
        written = os.write(fd, view)  # raises ENOSPC once nothing more fits
        if written == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def write_all_at(fd: int, data: bytes) -> None:
    """Write every byte of `data` at offset 0 (pwrite), or raise the OSError that stopped it."""
    done = 0
    while done < len(data):
        written = os.pwrite(fd, data[done:], done)
        if written == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        done += written


def replace_whole(path: str, data: bytes, tmp: str, mode: int = 0o600, fsync: bool = False) -> None:
    """Put `data` at `path` whole: written to `tmp` (created afresh, no link followed), flushed when `fsync`,
    then renamed over `path`. On any failure the temp file is removed (its blocks freed: the disk may be full)
    and `path` is left as it was."""
    fd = create_fresh(tmp, os.O_WRONLY, mode)
    try:
        write_all(fd, data)
        if fsync:
            os.fsync(fd)
        os.replace(tmp, path)
    except BaseException:
        discard_temp(tmp)
        raise
    finally:
        os.close(fd)


def discard_temp(tmp: str) -> None:
    """Remove a temp file that will not be renamed into place; a missing one is no error."""
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


def reserve(fd: int, size: int) -> None:
    """Allocate disk blocks for the first `size` bytes of the file, keeping its size; raises OSError: ENOSPC
    when the disk has no room for them, EOPNOTSUPP where the file system cannot (then nothing is kept)."""
    if _fallocate(fd, _KEEP_SIZE, 0, size) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def punch_hole(fd: int, offset: int, length: int) -> None:
    """Free the blocks of [offset, offset+length) of the file open for writing as `fd`: they read back as NUL
    bytes; the size stays (ext4, xfs, btrfs, tmpfs). Raises OSError: EOPNOTSUPP where the file system cannot
    (ramfs, vfat, NFS before 4.2)."""
    if _fallocate(fd, _PUNCH_HOLE | _KEEP_SIZE, offset, length) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def free_bytes(where: int | str) -> int:
    """Bytes this process may still write on the file system of `where` (a path or a descriptor; root may use
    the blocks reserved for it too). One statvfs."""
    info = os.statvfs(where)
    return (info.f_bfree if os.geteuid() == 0 else info.f_bavail) * info.f_frsize
