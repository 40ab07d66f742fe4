"""A daemon's state directory: resolved once, owned by the daemon's user alone, and held by one daemon at a time.

Claimed at start, before anything in it is read or recovered:
- the directory and every directory under it must be owned by our uid and not writable by group or others:
  anyone who can write there could plant a symlink or swap a task file that the daemon then trusts;
- an exclusive `flock` on `<name>.lock` in it: a second daemon of the same kind (a unit started twice, an
  operator's try-out on the production directory) exits naming the holder's pid instead of "recovering" the
  first daemon's running tasks;
- only then are the directories made 0700 (or 0750 when a group shares them).
A refusal is one line naming the path and the rule (click prints it, exit 1) and changes nothing on disk.
The lock file descriptor is close-on-exec: a task outliving its daemon must not keep the directory locked.
"""

from __future__ import annotations

import errno
import fcntl
import grp
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import click

from common.disk.whole_files import write_all_at

log = logging.getLogger(__name__)

PRIVATE_DIR_MODE = 0o700
# Read and traverse for the share group; setgid so what is created inside gets that group too.
SHARED_DIR_MODE = 0o2750
_FOREIGN_WRITE = stat.S_IWGRP | stat.S_IWOTH


class StateDirRefused(click.ClickException):
    """The state directory is unsafe or in use: the daemon does not start (exit 1)."""


@dataclass
class StateDir:
    """A claimed state directory; the lock lasts as long as this process (or until `release`)."""

    path: Path
    lock_path: Path
    lock_fd: int | None

    def release(self) -> None:
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def share_gid(group: str | None) -> int | None:
    """The gid of --share-group (a number or a group name of this machine), None when unset."""
    if group is None or not group.strip():
        return None
    group = group.strip()
    if group.isdigit():
        return int(group)
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise click.BadParameter(f"{group!r} is neither a gid nor a group of this machine",
                                 param_hint="--share-group") from None


def claim_state_dir(path: Path | str, name: str, gid: int | None = None) -> StateDir:
    """Resolve `path` to an absolute path, create it if missing, check it, lock `<name>.lock`, then make its
    directories the daemon's alone (0700), or readable by group `gid` (2750, that group)."""
    absolute = Path(os.path.abspath(path))
    try:
        absolute.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    except OSError as exc:  # the path runs through a regular file, a read-only mount, ...
        raise StateDirRefused(f"--state-dir {absolute}: cannot be used: {exc.strerror or exc}") from None
    check_tree(absolute)
    lock_path = absolute / f"{name}.lock"
    fd = _lock(lock_path, name)
    _set_modes(absolute, gid)
    log.info("state directory %s (locked by pid %d in %s)", absolute, os.getpid(), lock_path.name)
    return StateDir(absolute, lock_path, fd)


def check_tree(top: Path) -> None:
    """Refuse `top` or any directory under it that is not ours or that group or others may write."""
    _check_dir(top, os.stat(top))
    pending = [top]
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError as exc:
            raise StateDirRefused(f"state directory {current}: cannot be read: {exc.strerror}") from None
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                _check_dir(Path(entry.path), entry.stat(follow_symlinks=False))
                pending.append(Path(entry.path))


def remake_dir(path: Path | str, mode: int = PRIVATE_DIR_MODE) -> bool:
    """Make a directory of the state tree again after it was removed while the daemon ran (an operator's
    `rm -r`), with the mode it had at start; True when it was made, False when a directory of ours is there.
    What else is found there (a link, a file, a directory another uid owns or may write) is refused as at
    start, with an OSError naming the rule."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        try:
            _check_dir(Path(path), os.lstat(path))
        except StateDirRefused as exc:
            raise OSError(errno.EPERM, exc.message) from None
        return False
    os.chmod(path, mode)  # past the umask
    return True


def _check_dir(path: Path, info: os.stat_result) -> None:
    uid = os.geteuid()
    if not stat.S_ISDIR(info.st_mode):
        raise StateDirRefused(f"state directory {path}: is not a directory")
    if info.st_uid != uid:
        raise StateDirRefused(f"state directory {path}: is owned by uid {info.st_uid}, not by this daemon's uid {uid} "
                              "(it must belong to the daemon's user alone; chown it or choose another --state-dir)")
    if info.st_mode & _FOREIGN_WRITE:
        raise StateDirRefused(f"state directory {path}: is writable by group or others (mode "
                              f"{stat.S_IMODE(info.st_mode):04o}); it must not be (chmod 700)")


def _lock(lock_path: Path, name: str) -> int:
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:  # ELOOP: a symlink planted where the lock file goes
        raise StateDirRefused(f"lock file {lock_path}: cannot be opened: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            raise StateDirRefused(f"lock file {lock_path}: must be a regular file owned by this daemon's user")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise StateDirRefused(f"state directory {lock_path.parent} is in use by another {name} daemon "
                                  f"(pid {holder}): "
                                  "stop it first, or give this one another --state-dir") from None
        os.ftruncate(fd, 0)
        try:
            write_all_at(fd, f"{os.getpid()}\n".encode())
        except OSError as exc:
            # A full disk: the lock holds all the same; only a refused second daemon's message lacks the pid.
            log.warning("cannot write the pid into %s (%s)", lock_path, exc.strerror or exc)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _set_modes(top: Path, gid: int | None) -> None:
    # os.walk yields real directories only (it does not descend into symlinks), and nobody else can write in
    # this tree (check_tree), so none of them can be swapped for a link in between.
    for current, _, _ in os.walk(top):
        if gid is None:
            os.chmod(current, PRIVATE_DIR_MODE)
        else:
            os.chown(current, -1, gid)
            os.chmod(current, SHARED_DIR_MODE)
