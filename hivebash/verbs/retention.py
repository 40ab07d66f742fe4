"""The retention verb and housekeeping: which finished tasks go, and the thread that prunes them and reaps
orphans.

Finished tasks beyond keep_tasks, or older than keep_days, go oldest first, with their files. After each task
end only the count is checked (cheaply); a full pass (age-based retention, learning re-parented orphans)
runs at least every HOUSEKEEPING_INTERVAL.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from common.waiting import Doorbell
from hivebash.processes.reaper import OrphanReaper
from hivebash.tasks.entry import TaskEntry
from hivebash.verbs.rooms import Rooms

log = logging.getLogger(__name__)

HOUSEKEEPING_INTERVAL = 30.0  # seconds between retention/reaping passes when nothing wakes the thread


def choose_doomed(entries: Iterable[TaskEntry], keep: int, max_age: float, now: float) -> list[TaskEntry]:
    """The finished tasks retention removes: beyond the newest `keep`, or ended more than `max_age` s ago."""
    finished = sorted((e for e in entries if e.task.ended), key=lambda e: (_ended_at(e), e.task.seq))
    excess = max(0, len(finished) - keep)
    return [e for i, e in enumerate(finished) if i < excess or now - _ended_at(e) > max_age]


def _ended_at(entry: TaskEntry) -> float:
    task = entry.task
    return task.result.ended_at if task.result else task.submitted_at


def prune(rooms: Rooms, by_age: bool = True) -> None:
    """Prune finished tasks from memory (under the registry's lock), then from disk (after it). Without
    `by_age` (after each task end) only the count is checked, cheaply."""
    keep, max_age = rooms.settings.keep_tasks, rooms.settings.keep_days * 86400.0
    with rooms.registry.locked() as tasks:
        if not by_age and tasks.finished_count() <= keep:
            return
        doomed = choose_doomed(tasks.entries(), keep, max_age, time.time())
        for entry in doomed:
            tasks.forget(entry)
    for entry in doomed:
        # Unless its name was taken again meanwhile (then the files are the new task's).
        rooms.records.release(entry.id, entry.task, rooms.store.delete)
    if doomed:
        log.info("retention pruned %d finished task(s)", len(doomed))


class Housekeeper:
    """The housekeeping thread: woken at task ends (when there is something to do) and by the death of a
    known orphan (its pidfd); a full pass at least every HOUSEKEEPING_INTERVAL."""

    def __init__(self, wake: Doorbell, reaper: OrphanReaper, subreaper: bool, our_markers: Callable[[], set[str]],
                 prune: Callable[[bool], None], closing: Callable[[], bool]):
        self.wake = wake
        self.reaper = reaper
        self.subreaper = subreaper
        self.our_markers = our_markers
        self.prune = prune
        self.closing = closing
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="bash-housekeeping", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        last_full = time.monotonic()
        while not self.closing():
            self.wake.wait(HOUSEKEEPING_INTERVAL, also=self.reaper.watched())
            full = time.monotonic() - last_full >= HOUSEKEEPING_INTERVAL
            try:
                if self.subreaper and (full or self.reaper.has_known()):
                    self.reaper.reap(self.our_markers)
                self.prune(full)
            except Exception:
                log.exception("housekeeping failed")
            if full:
                last_full = time.monotonic()
