"""waitress's request threads, the most recently idle one woken first.

waitress hands each request to an idle request thread through one Condition, and `threading.Condition`
wakes the thread that has waited longest: with 32 request threads and a few busy clients, every call went to
the thread idle the longest, cold in the CPU's caches. `HotThreadDispatcher` wakes the thread that went idle
last instead, so a steady load runs on the same few threads (docs/performance.md, "The run path, a third
time"). Requests themselves are still taken first come, first served; only which idle thread takes the
next one changes. Both daemons' servers use it (common/serving/serve.py).
"""

from __future__ import annotations

import threading

from waitress.task import ThreadedTaskDispatcher


class MostRecentFirst(threading.Condition):
    """A Condition whose `notify` wakes the latest waiters first (threading.Condition wakes the earliest).
    It reads the waiter list of CPython's threading.Condition, whose `notify` it otherwise follows."""

    def notify(self, n: int = 1) -> None:
        if not self._is_owned():  # type: ignore[attr-defined]  # (CPython's own check, not in the stubs)
            raise RuntimeError("cannot notify on un-acquired lock")
        waiters = self._waiters  # type: ignore[attr-defined]  # the deque of waiting threads' locks
        while waiters and n > 0:
            waiter = waiters.pop()  # threading.Condition takes waiters[0]
            try:
                waiter.release()
            except RuntimeError:  # its wait ended meanwhile: not counted, as in threading.Condition
                continue
            n -= 1


class HotThreadDispatcher(ThreadedTaskDispatcher):
    """waitress's dispatcher with a `MostRecentFirst` queue condition (set before any thread waits on it)."""

    def __init__(self) -> None:
        super().__init__()
        self.queue_cv = MostRecentFirst(self.lock)
