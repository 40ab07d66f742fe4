"""A small real file system for the full-disk tests: a tmpfs mounted for one test, filled on demand.

Importable from any test (`pythonpath = tests` in setup.cfg); the `small_disk` fixture (tests/conftest.py)
mounts one. Mounting needs root (CAP_SYS_ADMIN): elsewhere the fixture skips the test, saying so. A fake
"disk full" would prove nothing about what write(2), rename(2) and fallocate(2) really do at the edge.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

PAGE = 4096
FILLER = ".filler"  # hidden, so no daemon takes it for one of its files


@dataclass
class SmallDisk:
    root: Path

    def free(self) -> int:
        info = os.statvfs(self.root)
        return info.f_bavail * info.f_frsize

    def fill(self, leave: int = 0) -> None:
        """Take every free byte but `leave` (rounded down to whole pages) with a filler file."""
        path = self.root / FILLER
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            chunk = b"\0" * (64 * PAGE)
            while True:
                try:
                    if os.write(fd, chunk if self.free() > len(chunk) else chunk[:PAGE]) == 0:
                        break
                except OSError:
                    break
            size = os.fstat(fd).st_size
            os.ftruncate(fd, max(0, size - (leave // PAGE) * PAGE))
        finally:
            os.close(fd)

    def make_room(self, size: int | None = None) -> None:
        """Give back `size` bytes of the filler (all of it by default)."""
        path = self.root / FILLER
        if not path.exists():
            return
        current = path.stat().st_size
        os.truncate(path, 0 if size is None else max(0, current - size))


def mount_small_disk(where: Path, size: int) -> SmallDisk:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for the full-disk tests needs root")
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): needs CAP_SYS_ADMIN")
    return SmallDisk(where)


def unmount(disk: SmallDisk) -> None:
    subprocess.run(["umount", "-l", str(disk.root)], capture_output=True)


def mount_ramfs(where: Path) -> Path:
    """A ramfs at `where`: a real filesystem that cannot punch holes (it has no fallocate at all: EOPNOTSUPP),
    as vfat, older NFS and some FUSE filesystems cannot. It has no size limit either: a test on it must bound
    what it writes itself."""
    if os.geteuid() != 0:
        pytest.skip("mounting a ramfs needs root")
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "ramfs", "-o", "mode=0700", "ramfs", str(where)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a ramfs here ({done.stderr.strip() or done.returncode}): needs CAP_SYS_ADMIN")
    return where
