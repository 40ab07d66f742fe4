"""Retention and housekeeping: which finished tasks go, and the thread that prunes them and reaps orphans.

Finished tasks beyond keep_tasks, or older than keep_days, go oldest first, with their files. After each task
end only the count is checked (cheaply); a full pass (age-based retention, learning re-parented orphans)
runs at least every HOUSEKEEPING_INTERVAL.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from common.config import BashSettings
from common.waiting import Doorbell

from .entry import TaskEntry, TaskTable
from .reaper import OrphanReaper
from .records import RecordWriter
from .todo_rules import TodoRules

log = logging.getLogger(__name__)

HOUSEKEEPING_INTERVAL = 30.0  # seconds between retention/reaping passes when nothing wakes the thread


def choose_doomed(entries: Iterable[TaskEntry], keep: int, max_age: float, now: float) -> list[TaskEntry]:
    """The finished tasks retention removes: beyond the newest `keep`, or ended more than `max_age` s ago."""
    finished = sorted((e for e in entries if e.task.terminal), key=lambda e: (_ended_at(e), e.task.seq))
    excess = max(0, len(finished) - keep)
    return [e for i, e in enumerate(finished) if i < excess or now - _ended_at(e) > max_age]


def _ended_at(entry: TaskEntry) -> float:
    task = entry.task
    return task.result.ended_at if task.result else task.submitted_at


class Retention:
    """Prunes finished tasks from memory (under the engine's `tasks_changed`) and then from disk (after it)."""

    def __init__(self, settings: BashSettings, tasks_changed: threading.Condition, table: TaskTable,
                 todo_rules: TodoRules, records: RecordWriter):
        self.settings = settings
        self.tasks_changed = tasks_changed
        self.table = table
        self.todo_rules = todo_rules
        self.records = records
        self.store = records.store

    def prune(self, by_age: bool = True) -> None:
        """Without `by_age` (after each task end) only the count is checked, cheaply."""
        keep, max_age = self.settings.keep_tasks, self.settings.keep_days * 86400.0
        with self.tasks_changed:
            if not by_age and self.table.finished_count_locked() <= keep:
                return
            doomed = choose_doomed(self.table.entries_locked(), keep, max_age, time.time())
            for entry in doomed:
                self.table.forget_locked(entry)
                self.todo_rules.forget_locked(entry)
        self.todo_rules.flush()
        for entry in doomed:
            # Unless its name was taken again meanwhile (then the files are the new task's).
            self.records.release(entry.id, entry.task, self.store.delete)
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
