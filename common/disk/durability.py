"""When a file written on a call's path reaches the disk: at once (`always`), or in group flushes (`batched`, the
default: a crash of the daemon loses nothing once write(2) and rename(2) returned; only a power cut needs the
fsync). One background thread flushes each batch and closes, off the call's path, descriptors whose close
frees blocks. Why each rule: docs/design.md, "When a file reaches the disk"; figures: docs/performance.md,
"Measurements behind the code".
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

ALWAYS, BATCHED = "always", "batched"
MODES = (BATCHED, ALWAYS)
FLUSHED = 0  # the ticket of a file known to be on the disk (every file, in `always` mode)
AWAKE_WINDOWS = 10  # empty windows the flusher waits through before it needs a wake-up again
TOOL_MIN_PATHS = 8  # paths in a batch from which one `sync` process flushes them (below: file by file)
TOOL_MAX_PATHS = 1000  # paths per `sync` process (its argument list stays far below ARG_MAX)


class Flusher:
    """Gets files written and renamed into place onto the disk per `mode`.

    Writers call `before_rename(fd)` once the data is written, rename, then `release(fd, path)`, which closes
    the descriptor. `sync` is the flush of one open file, and `tool` the `sync` program for large batches
    (None: none); both are seams for tests, which observe which files were flushed when rather than timing
    the disk. The tool is used only while `sync` is os.fdatasync: a test's own `sync` sees every file."""

    def __init__(self, directory: str | os.PathLike[str], mode: str = ALWAYS, window: float = 0.02,
                 sync: Callable[[int], None] | None = None, tool: str | None = "sync"):
        if mode not in MODES:
            raise ValueError(f"fsync: must be one of {', '.join(MODES)}, not {mode!r}")
        self.directory = os.fspath(directory)
        self.mode = mode
        self.window = window
        self.sync = sync or (os.fsync if mode == ALWAYS else os.fdatasync)
        self.tool = shutil.which(tool) if tool is not None else None
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._batch: dict[str, None] = {}  # paths to flush, each once, in the order handed over
        self._to_close: list[int] = []  # descriptors whose last close frees a file (close_later)
        self._oldest = 0.0  # monotonic time the first item of the batch was handed over
        self._idle = False  # the thread waits for work: the next hand-over must wake it
        self._closing = False
        self._handed = 0  # files released in `batched` mode so far
        self._flushed_upto = 0  # of those, how many are on the disk (what `reached_disk` compares with)
        self._thread: threading.Thread | None = None
        self._directory_fd: int | None = None
        self._directory_stale = False  # directory_replaced: reopen it before the next flush of its entries

    def before_rename(self, fd: int) -> None:
        """The file's data is written; in `always` mode it is flushed now, before its name is published."""
        if self.mode == ALWAYS:
            self.sync(fd)

    def release(self, fd: int, path: str) -> int:
        """The file is renamed into place at `path`: close it, and in `batched` mode queue `path` for the
        next group flush. Returns the file's ticket for `reached_disk`."""
        os.close(fd)
        if self.mode == ALWAYS:
            return FLUSHED
        with self._lock:
            self._handed += 1
            if self._closing:  # shutting down: no thread will take it any more
                self._flush_now([path])
                self._flushed_upto = self._handed
                return self._handed
            self._batch[path] = None
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
                batch, self._batch = list(self._batch), {}
                freed, self._to_close = self._to_close, []
                upto = self._handed
            self._flush_now(batch)
            for fd in freed:
                os.close(fd)
            with self._lock:
                self._flushed_upto = upto
                if closing and not self._batch and not self._to_close:
                    return

    def _flush_now(self, paths: list[str]) -> None:
        """Each path, then the directory: a large batch through the `sync` tool, chunk by chunk; what it could not
        take (a small batch, no tool, a tool that would not run) file by file here."""
        if self.sync is os.fdatasync and len(paths) >= TOOL_MIN_PATHS:
            paths = [path for first in range(0, len(paths), TOOL_MAX_PATHS)
                     for path in self._flush_with_tool(paths[first:first + TOOL_MAX_PATHS])]
        if not paths:
            return
        for path in paths:
            self._flush_one(path)
        self._sync_directory()

    def _flush_one(self, path: str) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return  # removed since (retention): nothing of it to keep
        except OSError as exc:
            log.error("cannot open %s to flush it to disk: %s", path, exc.strerror or exc)
            return
        try:
            self.sync(fd)
        except OSError as exc:  # the data stays in the page cache; a crash of the daemon loses nothing
            log.error("cannot flush a written file to disk: %s", exc.strerror or exc)
        finally:
            os.close(fd)

    def _flush_with_tool(self, paths: list[str]) -> list[str]:
        """fdatasync of each path, then of the directory, in one `sync` process: none of it waits for our GIL.
        A path removed since is no error (its message is dropped); any other failure is logged. Returns the
        paths left to flush here: none, or all of them when there is no tool (any more) to run."""
        if self.tool is None:
            return paths
        try:
            done = subprocess.run([self.tool, "--data", "--", *paths, self.directory], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={"LC_ALL": "C"})
        except OSError as exc:
            log.error("cannot run %s to flush %d files (%s); flushing them one by one", self.tool, len(paths), exc)
            self.tool = None
            return paths
        failures = [line for line in done.stderr.decode(errors="replace").splitlines()
                    if "No such file or directory" not in line]
        if done.returncode != 0 and failures:
            log.error("flushing %d files to disk failed in part: %s", len(paths), "; ".join(failures)[:500])
        return []

    def directory_replaced(self) -> None:
        """The directory was removed and made again: its entries are flushed through a new descriptor (the
        thread that uses the old one closes it, at its next batch)."""
        self._directory_stale = True  # a flag, read without the lock (_sync_directory may run under it)

    def _sync_directory(self) -> None:
        try:
            stale, self._directory_stale = self._directory_stale, False
            if stale and self._directory_fd is not None:
                os.close(self._directory_fd)
                self._directory_fd = None
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
