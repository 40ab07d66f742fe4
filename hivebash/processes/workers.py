"""A pool of long-lived threads for task workers (one task at a time each), so starting a task never waits
for a new thread."""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class WorkerPool:
    """Long-lived threads that run task workers, so starting a task never waits for a new thread.

    `Thread.start` returns only once the new thread runs, which under load means once it got the GIL: a large
    part of `run`'s time (docs/performance.md, "Measurements behind the code"). An idle pooled thread is woken
    by a lock release instead, and the caller goes on.
    The pool grows to the number of tasks running at once. Up to `keep_idle` idle threads wait for work for
    `idle_seconds`; more than that retire after `surplus_seconds`, so a burst of long tasks does not leave an
    idle daemon with hundreds of threads.

    Each thread owns an eventfd for its whole life and hands it to every job it runs (`job(wake_fd)`), which
    must leave it drained: making and closing one per task would be two more syscalls on every task's path, and
    under load each syscall hands the GIL to another thread and waits to get it back (docs/performance.md,
    "Measurements behind the code").
    """

    def __init__(self, name: str, keep_idle: int = 8, idle_seconds: float = 60.0, surplus_seconds: float = 0.5):
        self.name = name
        self.keep_idle = keep_idle
        self.idle_seconds = idle_seconds
        self.surplus_seconds = surplus_seconds
        self._jobs_changed = threading.Condition(threading.Lock())  # guards the jobs and the thread counts
        self._jobs: collections.deque[Callable[[int], None]] = collections.deque()
        self._idle = 0
        self._live = 0
        self._serial = 0

    def submit(self, job: Callable[[int], None]) -> None:
        """Run `job(wake_fd)` in a pooled thread: an idle one if there is one for it, else a new one."""
        with self._jobs_changed:
            self._jobs.append(job)
            if self._idle >= len(self._jobs):  # every queued job has an idle thread to take it
                self._jobs_changed.notify()
                return
            self._live += 1
            self._serial += 1
            number = self._serial
        threading.Thread(target=self._work, name=f"{self.name}-{number}", daemon=True).start()

    def _work(self) -> None:
        wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        try:
            self._serve(wake)
        finally:
            os.close(wake)

    def _serve(self, wake: int) -> None:
        while True:
            with self._jobs_changed:
                linger = self.idle_seconds if self._idle < self.keep_idle else self.surplus_seconds
                deadline = time.monotonic() + linger
                self._idle += 1
                while not self._jobs:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        self._idle -= 1
                        self._live -= 1
                        return
                    self._jobs_changed.wait(remaining)
                self._idle -= 1
                job = self._jobs.popleft()
            try:
                job(wake)
            except Exception:  # a job handles its own errors; this only keeps the thread alive
                log.exception("pooled job failed")

    def threads(self) -> int:
        """Threads started and not yet retired (for tests and diagnostics)."""
        with self._jobs_changed:
            return self._live
