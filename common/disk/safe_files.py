"""Opening the daemons' own files without following links: what is found where a daemon file should be is
either a regular file of ours or an error, never a link to somewhere else.

The state directory is ours alone (common/disk/state_dir.py refuses it otherwise); these opens are the second
wall, for what was planted before the daemon started or by a task running as the same user.
"""

from __future__ import annotations

import errno
import os
import stat

NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


class NotOurFile(OSError):
    """A symlink, a non-regular file or a file of another user where a daemon file should be."""


def create_fresh(path: str, flags: int, mode: int = 0o600) -> int:
    """Create `path` afresh (O_CREAT|O_EXCL|O_NOFOLLOW) and return its descriptor. Something already there (a
    temp file left by a crash, or a planted link) is removed first: unlink removes a link itself, never its
    target, and the exclusive create then makes sure we write into a new file of our own."""
    flags |= os.O_CREAT | os.O_EXCL | NOFOLLOW
    try:
        return os.open(path, flags, mode)
    except FileExistsError:
        os.unlink(path)
        return os.open(path, flags, mode)


def open_own(path: str, flags: int) -> int:
    """Open an existing daemon file (no create) without following a link; refuse anything but a regular file
    owned by our uid. O_NONBLOCK keeps a FIFO planted there from blocking the open; it is cleared again."""
    try:
        fd = os.open(path, flags | NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotOurFile(errno.ELOOP, "is a symbolic link, not a file of this daemon", path) from None
        raise
    try:
        check_own(fd, path)
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def check_own(fd: int, path: str) -> os.stat_result:
    """The file's status, once it is known to be a regular file of our uid."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise NotOurFile(errno.EPERM, "is not a regular file", path)
    if info.st_uid != os.geteuid():
        raise NotOurFile(errno.EPERM, f"is owned by uid {info.st_uid}, not by this daemon's user", path)
    return info


def read_own(path: str) -> bytes:
    """The whole content of a daemon file (a task record), with the checks of `open_own`."""
    fd = open_own(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        return f.read()
