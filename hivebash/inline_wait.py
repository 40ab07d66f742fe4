"""Inline waits: until one of some tasks has ended (and its end is recorded), or a new line of their output
matches `wait_for`, or the client cancels the call, or the window closes; meanwhile, for a client that asked,
progress (hivebash/wait_progress.py says what, common/call_progress.Pacer when).

A task's end wakes the wait through the engine's condition (no polling). Output is written by the task's own
processes straight to its files, so nothing in the daemon can signal a new line: with `wait_for`, the wait
also wakes to look at the files' growth, first after WATCH_RECHECK_FIRST and then at doubling intervals up
to WATCH_RECHECK_MAX (a check costs one fstat per stream when nothing was written).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from common.call_progress import NO_PROGRESS, Cancellation, Pacer
from common.waiting import wait_for

from . import output_views as ov
from .entry import TaskEntry
from .wait_progress import WaitTelling

WATCH_RECHECK_FIRST = 0.02  # seconds
WATCH_RECHECK_MAX = 0.25  # seconds: how late a matching line can be noticed at worst


def watches_for(entries: list[TaskEntry], paths: Callable[[str], list[ov.Source]], pattern: str,
                from_start: bool) -> list[tuple[str, ov.Watch]]:
    """A Watch of each stream of each task: from the files' start (a task `run` just created) or their end."""
    return [(e.id, ov.watch(src, pattern, from_end=not from_start)) for e in entries for src in paths(e.id)]


def wait_any(cond: threading.Condition, entries: list[TaskEntry], seconds: float, clock: Callable[[], float],
             watches: list[tuple[str, ov.Watch]], first_recheck: float = WATCH_RECHECK_FIRST,
             cancel: Cancellation | None = None, progress=NO_PROGRESS, telling: WaitTelling | None = None
             ) -> tuple[ov.Line | None, str | None]:
    """Wait (called without the lock); returns the matching line and its task's id, or (None, None).
    `first_recheck`: the first look at the files' growth (send's is sooner: an echo comes in a millisecond). A
    cancel ends the wait at once; with `telling`, `progress` is reported as common.call_progress.Pacer says."""
    cancel = cancel or Cancellation()

    def stop() -> bool:
        return cancel.fired or any(e.ended_and_recorded for e in entries)

    with cancel.wakes(cond):
        if not watches and telling is None:
            with cond:
                wait_for(cond, stop, seconds, clock)
            return None, None
        found = _watch_and_tell(cond, stop, seconds, clock, watches, first_recheck, progress, telling)
    if found[0] is not None or cancel.fired:
        return found
    # An ended task's last lines, the last one even without a newline.
    return _first_match(watches, final={e.id for e in entries if e.task.terminal})


def _watch_and_tell(cond, stop, seconds, clock, watches, recheck, progress, telling) -> tuple[ov.Line | None, str | None]:
    """The wait that looks at the output: for a `wait_for` match (rechecks doubling to WATCH_RECHECK_MAX) and,
    with `telling`, for news to report."""
    start = clock()
    deadline, pacer = start + seconds, Pacer(start) if telling is not None else None
    while True:
        found = _first_match(watches, final=False)
        if found[0] is not None:
            return found
        now = clock()
        remaining = deadline - now
        if remaining <= 0:
            return None, None
        pause = min(remaining, recheck if watches else remaining, pacer.next_look(now) if pacer else remaining)
        with cond:
            if wait_for(cond, stop, pause, clock):
                return None, None
        recheck = min(recheck * 2, WATCH_RECHECK_MAX)
        if pacer is not None:
            now = clock()
            if now < deadline and pacer.due(now, telling.news()):
                progress.report(now - start, seconds, telling.message())


def _first_match(watches: list[tuple[str, ov.Watch]], final: bool | set[str]) -> tuple[ov.Line | None, str | None]:
    for task_id, w in watches:
        line = w.check(final=final is True or isinstance(final, set) and task_id in final)
        if line is not None:
            return line, task_id
    return None, None
