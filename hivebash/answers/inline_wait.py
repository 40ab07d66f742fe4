"""Inline waits: until one of some tasks has ended (and its end is recorded), or a new line of their output
matches `wait_for`, or the client cancels the call, or the window closes; meanwhile, for a client that asked,
progress (hivebash/answers/wait_progress.py says what, common/call_progress.Pacer when).

A task's end wakes the wait through the registry's condition (no polling). Output is written by the task's own
processes straight to its files, so nothing in the daemon can signal a new line: with `wait_for`, the wait
also wakes to look at the files' growth, first after WATCH_RECHECK_FIRST and then at doubling intervals up
to WATCH_RECHECK_MAX (a check costs one fstat per stream when nothing was written). A wait on a task that
takes input also ends when the task waits for it (processes/input_watch.py), looked at every 2 ms at
most early in the wait, less often later (INPUT_RECHECKS).
"""

from __future__ import annotations

from collections.abc import Callable

from common.protocol.call_progress import NO_PROGRESS, Cancellation, Pacer, ProgressReporter
from hivebash import output_views as ov
from hivebash.answers.wait_progress import WaitTelling
from hivebash.processes.input_watch import Asking, InputWatch
from hivebash.stdin.task_input import NULL, TTY
from hivebash.tasks.entry import TaskEntry
from hivebash.tasks.registry import LockedTasks, TaskRegistry

WATCH_RECHECK_FIRST = 0.02  # seconds
WATCH_RECHECK_MAX = 0.25  # seconds: how late a matching line can be noticed at worst
# Seconds between looks at the tasks' input, by how long the wait has lasted: a REPL's answer comes in
# milliseconds (a look costs about 75 us of /proc reads).
INPUT_RECHECKS = ((0.1, 0.002), (2.0, 0.01), (float("inf"), 0.05))  # (up to this far into the wait, at most)
INPUT_RECHECK_FIRST = 0.001  # seconds: the first look of a wait at its tasks' input


class InputWaits:
    """The looks of one inline wait at its tasks' input: `found` is the first task seen waiting for it. A wait
    for input the agent was told of already ends no wait: a call that waits on knowing it waits for the end
    (a timeout's, a kill's), or for the task to ask again."""

    def __init__(self, watch: InputWatch, entries: list[TaskEntry]):
        self.watch = watch
        self.entries = [e for e in entries if e.task.stdin != NULL]
        self.found: tuple[TaskEntry, Asking] | None = None
        self.due: float | None = None  # when a look can tell what the last could not yet (a settle's end)

    def look(self) -> bool:
        """Whether one of the tasks waits for input now (a task not started yet is looked at once it runs)."""
        self.due = None
        for entry in self.entries:
            check = self.watch.check(entry)
            if check is None:
                continue
            asking = check.look()
            if asking is not None and asking.key != entry.told_asking:  # (a tuple read without the lock)
                self.found = (entry, asking)
                return True
            if check.due is not None:
                self.due = check.due if self.due is None else min(self.due, check.due)
        return False

    @staticmethod
    def cap(waited: float) -> float:
        return next(every for until, every in INPUT_RECHECKS if waited < until)


def watches_for(entries: list[TaskEntry], paths: Callable[[str], list[ov.Source]], pattern: str,
                from_start: bool) -> list[tuple[str, ov.Watch]]:
    """A Watch of each stream of each task: from the files' start (a task `run` just created), or from where
    the agent was shown each stream up to (its new_only cursor): a line printed before the call, but never
    shown, counts. Each follows its file's dropped middle as it grows (Task.dropped)."""
    return [(e.id, ov.watch(src, pattern, start=0 if from_start else dict(e.seen_to).get(src.stream, 0),
                            gap_of=gap_of(e, src.stream)))
            for e in entries for src in paths(e.id)]


def prompt_watches(entry: TaskEntry, sources: list[ov.Source], pattern: str,
                   from_start: bool) -> list[tuple[str, ov.Watch]]:
    """`wait_for` over a task that takes input: its prompts count. From the files' start or the agent's cursor,
    as `watches_for`: a prompt printed before a `status` call but never shown is what the call waits for (the
    task is reading by then, and the input watch must not end the wait before it is matched)."""
    seen = dict(entry.seen_to)
    return [(entry.id, ov.PromptWatch(src, pattern, 0 if from_start else seen.get(src.stream, 0),
                                      gap_of(entry, src.stream))) for src in sources]


def output_sources(sources: Callable[[str], list[ov.Source]], entry: TaskEntry) -> list[ov.Source]:
    """The streams a task writes: a terminal's output is all in its stdout."""
    found = sources(entry.id)
    return found[:1] if entry.task.stdin == TTY else found


def wait_for_watches(sources: Callable[[str], list[ov.Source]], entries: list[TaskEntry], pattern: str,
                     from_start: bool) -> list[tuple[str, ov.Watch]]:
    """`wait_for` of a run or a status: each stream from the files' start (a task `run` just created) or their
    ends; a task that takes input also by its unfinished last line (a prompt)."""
    plain = [e for e in entries if e.task.stdin == NULL]
    watches = watches_for(plain, sources, pattern, from_start)
    for e in entries:
        if e.task.stdin != NULL:
            watches += prompt_watches(e, output_sources(sources, e), pattern, from_start)
    return watches


def gap_of(entry: TaskEntry, stream: str) -> Callable[[], ov.Gap | None]:
    """The stream's dropped middle as the task's record has it at each call (a Watch follows it as it grows)."""
    task = entry.task  # its `dropped` is replaced whole at each change: read without the lock
    return lambda: ov.Gap.of(task.dropped, stream)


def wait_ended(tasks: LockedTasks, entries: list[TaskEntry], seconds: float, cancel: Cancellation | None = None,
               every: bool = False) -> bool:
    """Wait (with the registry's lock held; it is released meanwhile) until one of `entries` (`every`: all of
    them) has ended and its end is on disk, a cancel, or `seconds` pass (the caller holds
    `registry.wakes_on(cancel)`)."""
    return tasks.wait(_stop(entries, cancel, every), seconds)


def _stop(entries: list[TaskEntry], cancel: Cancellation | None, every: bool = False) -> Callable[[], bool]:
    if len(entries) == 1:  # run's wait, and most of status's: no generator per look
        task = entries[0].task
        if cancel is None:
            return lambda: task.terminal
        return lambda: cancel.fired or task.terminal
    ended = all if every else any
    if cancel is None:
        return lambda: ended(e.task.terminal for e in entries)
    return lambda: cancel.fired or ended(e.task.terminal for e in entries)


def wait_any(registry: TaskRegistry, entries: list[TaskEntry], seconds: float, clock: Callable[[], float],
             watches: list[tuple[str, ov.Watch]], first_recheck: float = WATCH_RECHECK_FIRST,
             cancel: Cancellation | None = None, progress: ProgressReporter = NO_PROGRESS,
             telling: WaitTelling | None = None,
             every: bool = False, lingering: Callable[[], bool] | None = None,
             inputs: InputWaits | None = None) -> tuple[ov.Line | None, str | None]:
    """Wait (called without the lock) until an end or a matching line; returns the matching line and its
    task's id, or (None, None). `first_recheck`: the first look at the files' growth (send's is sooner: an
    echo comes in a millisecond). A cancel ends the wait at once; with `telling`, `progress` is reported as
    common.protocol.call_progress.Pacer says. `every`: until all `entries` have ended, not the first. `lingering()`:
    processes an ended task's shell started still run (checked outside the lock): `wait_for` keeps watching
    the output they write (a `cmd` ended with `&`). `inputs`: the wait also ends when one of its tasks waits
    for input (`inputs.found` says which)."""
    cancel = cancel or Cancellation()
    stop = _stop(entries, cancel, every)
    deadline = clock() + seconds
    with registry.wakes_on(cancel):
        if not watches and telling is None and inputs is None:
            with registry.locked() as tasks:
                tasks.wait(stop, seconds)
            return None, None
        found = _watch_and_tell(registry, stop, seconds, clock, watches, first_recheck, progress, telling,
                                inputs=inputs)
        if inputs is not None and inputs.found is not None:
            return found
        if found[0] is None and not cancel.fired and watches and lingering is not None and lingering():
            fired = cancel
            found = _watch_and_tell(registry, lambda: fired.fired, max(0.0, deadline - clock()), clock, watches,
                                    first_recheck, progress, telling, gone=lambda: not lingering())
    if found[0] is not None or cancel.fired:
        return found
    # An ended task's last lines, the last one even without a newline.
    return _first_match(watches, final={e.id for e in entries if e.task.ended})


def _watch_and_tell(registry: TaskRegistry, stop: Callable[[], bool], seconds: float, clock: Callable[[], float],
                    watches: list[tuple[str, ov.Watch]], recheck: float, progress: ProgressReporter,
                    telling: WaitTelling | None, gone: Callable[[], bool] | None = None,
                    inputs: InputWaits | None = None) -> tuple[ov.Line | None, str | None]:
    """The wait that looks at the output: for a `wait_for` match (rechecks doubling to WATCH_RECHECK_MAX), at
    the tasks' input (`inputs`) and, with `telling`, for news to report. `gone()`: what writes the output has
    exited (the wait ends)."""
    start = clock()
    deadline, pacer = start + seconds, Pacer(start) if telling is not None else None
    if inputs is not None:  # a new task's prompt comes within milliseconds of its start
        recheck = min(recheck, INPUT_RECHECK_FIRST)
    while True:
        found = _first_match(watches, final=False)
        if found[0] is not None:
            return found
        if inputs is not None and inputs.look():  # (its output all in its files: a line written meanwhile counts)
            return _first_match(watches, final=False)
        now = clock()
        remaining = deadline - now
        if remaining <= 0:
            return None, None
        pause = min(remaining, recheck if watches or inputs else remaining,
                    pacer.next_look(now) if pacer else remaining,
                    max(0.0, inputs.due - now) if inputs is not None and inputs.due is not None else remaining)
        with registry.locked() as tasks:
            if tasks.wait(stop, pause):
                return None, None
        if gone is not None and gone():
            return _first_match(watches, final=True)
        cap = WATCH_RECHECK_MAX if inputs is None else inputs.cap(clock() - start)
        recheck = min(recheck * 2, cap)
        if pacer is not None and telling is not None:
            now = clock()
            if now < deadline and pacer.due(now, telling.news()):
                progress.report(now - start, seconds, telling.message())


def _first_match(watches: list[tuple[str, ov.Watch]], final: bool | set[str]) -> tuple[ov.Line | None, str | None]:
    for task_id, w in watches:
        line = w.check(final=final is True or isinstance(final, set) and task_id in final)
        if line is not None:
            return line, task_id
    return None, None
