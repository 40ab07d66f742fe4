"""When a file written on a call's path reaches the disk: at once (`always`), or in group flushes (`batched`).

What a crash of the daemon (kill -9, an exception) must not lose is already safe once `write(2)` and
`rename(2)` have returned: the data is in the kernel's page cache, and the next start reads it back. An fsync
only protects against a power loss or a kernel crash, which also ends every process a task started. So by
default a file written on the path of a call is handed to one background thread, which flushes everything
handed to it within `window` seconds in one batch (fdatasync of each file, then fsync of their directory, so
the renames are on disk too), the way databases offer group commit. `always` fsyncs each file before it is
renamed into place and before the call goes on; the directory is then not fsync'ed
(a power cut leaves the previous, consistent record).

Both modes keep a file's descriptor open until it is flushed, so the flush reaches the inode that was written
even if its name has been replaced or removed since.

The same thread closes, off the caller's path, descriptors that hold a replaced or removed file's last
reference (`close_later`): freeing a file's disk blocks can be slow. On ext4 mounted with `discard` and no
journal (this VM's disk), the kernel trims the freed blocks before unlink(2) or a rename over the file
returns: ~1-2 ms, more than the rest of a task's end. A record that was flushed, or that was itself renamed
over an older one (ext4's auto_da_alloc then allocates its blocks at the rename), owns blocks; the first
record of a task, replaced before its flush, owns none (delayed allocation).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)

ALWAYS, BATCHED = "always", "batched"
MODES = (BATCHED, ALWAYS)
FLUSHED = 0  # the ticket of a file known to be on the disk (every file, in `always` mode)
AWAKE_WINDOWS = 10  # empty windows the flusher waits through before it needs a wake-up again


class Flusher:
    """Owns descriptors of files written and renamed into place; gets them onto the disk per `mode`.

    Writers call `before_rename(fd)` once the data is written, rename, then `release(fd)` (never close it
    themselves). `sync` is the flush of one file (a seam for tests: they observe which files were flushed
    when, rather than timing the disk)."""

    def __init__(self, directory: str | os.PathLike, mode: str = ALWAYS, window: float = 0.02,
                 sync: Callable[[int], None] | None = None):
        if mode not in MODES:
            raise ValueError(f"fsync: must be one of {', '.join(MODES)}, not {mode!r}")
        self.directory = os.fspath(directory)
        self.mode = mode
        self.window = window
        self.sync = sync or (os.fsync if mode == ALWAYS else os.fdatasync)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._batch: list[int] = []
        self._to_close: list[int] = []  # descriptors whose last close frees a file (close_later)
        self._oldest = 0.0  # monotonic time the first descriptor of the batch was handed over
        self._idle = False  # the thread waits for work: the next hand-over must wake it
        self._closing = False
        self._flushed = threading.Condition(self._lock)
        self._handed = 0  # files released in `batched` mode so far
        self._flushed_upto = 0  # of those, how many are on the disk (what `wait_flushed` watches)
        self._thread: threading.Thread | None = None
        self._directory_fd: int | None = None

    def before_rename(self, fd: int) -> None:
        """The file's data is written; in `always` mode it is flushed now, before its name is published."""
        if self.mode == ALWAYS:
            self.sync(fd)

    def release(self, fd: int) -> int:
        """The file is renamed into place: close it (`always`), or queue it for the next group flush. Returns
        the file's ticket for `reached_disk`."""
        if self.mode == ALWAYS:
            os.close(fd)
            return FLUSHED
        with self._lock:
            self._handed += 1
            if self._closing:  # shutting down: no thread will take it any more
                self._flush_now([fd])
                self._flushed_upto = self._handed
                return self._handed
            self._batch.append(fd)
            self._have_work_locked()
            return self._handed

    def reached_disk(self, ticket: int) -> bool:
        """Whether the file `release` gave `ticket` has been flushed (its blocks are allocated). Read without
        the lock: a stale answer only says False a moment too long."""
        return ticket <= self._flushed_upto

    def close_later(self, fd: int) -> None:
        """Close `fd` in the flusher's thread, soon: its last close frees a replaced or removed file."""
        with self._lock:
            if self._closing:
                os.close(fd)
                return
            self._to_close.append(fd)
            self._have_work_locked()

    def _have_work_locked(self) -> None:
        """Something was handed over: the batch's window starts with its first item; wake the thread if idle."""
        if len(self._batch) + len(self._to_close) == 1:
            self._oldest = time.monotonic()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="fsync-flusher", daemon=True)
            self._thread.start()
        elif self._idle:  # one wake-up per batch, not per file
            self._idle = False
            self._wake.notify()

    def wait_flushed(self, timeout: float) -> bool:
        """Block until every file released before this call is on the disk; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._lock:
            target = self._handed
            while self._flushed_upto < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._flushed.wait(left)
        return True

    def close(self) -> None:
        """Flush what is queued and stop the thread (the daemon is stopping)."""
        with self._lock:
            self._closing = True
            self._idle = False
            self._wake.notify()
            thread = self._thread
        if thread is not None:
            thread.join(30)
        with self._lock:
            if self._directory_fd is not None:
                os.close(self._directory_fd)
                self._directory_fd = None

    def _run(self) -> None:
        while True:
            with self._lock:
                for _ in range(AWAKE_WINDOWS):
                    # Stay awake a few windows before going idle: while calls keep coming, none of them has
                    # to wake this thread (a wake-up on a call's path is a thread hand-off there).
                    if self._batch or self._to_close or self._closing:
                        break
                    self._wake.wait(self.window)
                while not self._batch and not self._to_close and not self._closing:
                    self._idle = True
                    self._wake.wait()
                self._idle = False
                # Collect the batch: every file handed over meanwhile shares its flush. Closes wait too, so that
                # freeing blocks happens away from the call that handed them over, not while it answers.
                deadline = self._oldest + self.window
                while not self._closing and (left := deadline - time.monotonic()) > 0:
                    self._wake.wait(left)
                closing = self._closing
                batch, self._batch = self._batch, []
                freed, self._to_close = self._to_close, []
                upto = self._handed
            self._flush_now(batch)
            for fd in freed:
                os.close(fd)
            with self._lock:
                self._flushed_upto = upto
                self._flushed.notify_all()
                if closing and not self._batch and not self._to_close:
                    return

    def _flush_now(self, fds: list[int]) -> None:
        for fd in fds:
            try:
                if not _superseded(fd):
                    self.sync(fd)
            except OSError as exc:  # the data stays in the page cache; a crash of the daemon loses nothing
                log.error("cannot flush a written file to disk: %s", exc.strerror or exc)
            finally:
                os.close(fd)
        if fds:
            self._sync_directory()

    def _sync_directory(self) -> None:
        try:
            if self._directory_fd is None:  # opened once: two syscalls fewer a batch
                fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                if self._closing:  # the last flushes: nobody would close it
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    return
                self._directory_fd = fd
            os.fsync(self._directory_fd)
        except OSError as exc:
            log.error("cannot flush the entries of %s: %s", self.directory, exc.strerror or exc)


def _superseded(fd: int) -> bool:
    """The file has no name any more: a newer record was renamed over it (and is in this batch or a later one),
    or it was deleted. Its flush would buy nothing: the directory flush that follows publishes the names as
    they are now, and a power cut before the newer file's flush leaves the record as the disk last had it.
    Most tasks end within a window of their start, so this spares half the flushes (one fstat instead of a
    write to the device: ~44 ms of CPU a batch at 8 clients, scripts/bench.py throughput)."""
    return os.fstat(fd).st_nlink == 0
