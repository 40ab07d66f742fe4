"""What `run`, `status`, `send` and `kill` answer with: a task's view (snapshot, output, leftovers still alive)
and the one inline wait before it. The snapshot is taken under the registry's lock; the files and /proc are read
after it is released."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TypeVar

from common.notices import Notices
from common.protocol.call_progress import MIN_GAP, NO_PROGRESS, Cancellation, ProgressReporter
from common.protocol.tools import never_gone
from common.waiting import WaitSlots, WaitWindow
from hivebash import output_views as ov
from hivebash.answers import inline_wait
from hivebash.answers.outcomes import STARTED_BYTES, STARTED_VIEW, Outcome, read_output
from hivebash.answers.wait_progress import WaitTelling
from hivebash.disk.store import TaskStore
from hivebash.processes.input_watch import Asking, InputWatch
from hivebash.processes.ops import TaskProcessOps
from hivebash.tasks.entry import TaskEntry
from hivebash.tasks.registry import LockedTasks, TaskRegistry
from hivebash.tasks.snapshot import TaskSnapshot

R = TypeVar("R")
Snapshot = tuple[TaskSnapshot, TaskEntry, list, dict[str, int]]


@dataclass(frozen=True)
class Waited:
    """What an inline wait saw: the `wait_for` line that ended it and its task's id, how long it took,
    whether every wait slot was taken (then it did not wait), and the task it found waiting for input."""

    matched: ov.Line | None = None
    matched_id: str | None = None
    seconds: float = 0.0
    skipped: bool = False
    asking: Asking | None = None
    asking_id: str | None = None


class Answers:
    """Views and inline waits over the registry (each method takes the lock itself)."""

    def __init__(self, registry: TaskRegistry, store: TaskStore, ops: TaskProcessOps, slots: WaitSlots,
                 notices: Notices, tail_bytes: int):
        self.registry = registry
        self.store = store
        self.ops = ops
        self.slots = slots
        self.notices = notices  # todos reach the agent: answers may promise one
        self.tail_bytes = tail_bytes  # per stream, of a plain tail
        self.inputs = InputWatch(registry, self._input_paths)  # which pipe and tty tasks wait for input

    def _input_paths(self, task_id: str, tty: bool) -> list[str]:
        out = str(self.store.file(task_id, "out"))
        return [out] if tty else [out, str(self.store.file(task_id, "err"))]

    def wait(self, entries: list[TaskEntry], window: WaitWindow, finish: Callable[[LockedTasks, Waited], R], *,
             watches: Sequence[tuple[str, ov.Watch]] = (), wait_for: str | None = None,
             cancel: Cancellation | None = None, progress: ProgressReporter = NO_PROGRESS,
             wait_on: list[TaskEntry] | None = None, every: bool = False,
             first_recheck: float = inline_wait.WATCH_RECHECK_FIRST,
             sources: Callable[[str], list[ov.Source]] | None = None, leftovers_write: bool = True,
             asking: bool = False) -> R:
        """The one inline wait of `run`, `status`, `send` and `kill`: until the end of `wait_on` (default all
        of `entries`; `every`: all of them, not the first), a `watches` match, a cancel or the window, under a
        wait slot (none free: no wait at all, `Waited.skipped`). A client that asked for progress gets it
        meanwhile, about `sources` (default the task's two streams). `leftovers_write`: with `wait_for`, the
        output a trailing `&` left running is watched on while it lives. `asking`: the wait also ends when a
        task waits for input (`Waited.asking`). `finish` runs under the lock that ends the wait, so what it takes
        (a snapshot, the agent's side) is what the wait saw."""
        start = time.monotonic()
        matched, matched_id = None, None
        waited_on = entries if wait_on is None else wait_on
        with self._slot(window) as slot, self.registry.wakes_on(cancel):
            waits = slot and window.seconds > 0
            telling = (WaitTelling(self.registry, entries, sources or self.sources, wait_for, time.monotonic)
                       if waits and progress.wanted else None)
            inputs = inline_wait.InputWaits(self.inputs, waited_on) if waits and asking else None
            if inputs is not None and not inputs.entries:
                inputs = None
            if waits and (watches or telling is not None or inputs is not None):
                lingering = (lambda: self._lingering(entries)) if leftovers_write else None
                matched, matched_id = inline_wait.wait_any(
                    self.registry, waited_on, window.seconds, time.monotonic, list(watches),
                    first_recheck=first_recheck, cancel=cancel, progress=progress, telling=telling, every=every,
                    lingering=lingering, inputs=inputs)
            found = inputs.found if inputs is not None else None
            waited = time.monotonic() - start
            if found is not None and telling is not None and waited >= MIN_GAP:  # (sooner: one JSON body)
                progress.report(waited, window.seconds, found[1].line)
            with self.registry.locked() as tasks:
                if waits and not watches and telling is None and inputs is None:
                    inline_wait.wait_ended(tasks, waited_on, window.seconds, cancel, every)
                if found is not None:
                    tasks.agent.input_shown(found[0], found[1].key)
                return finish(tasks, Waited(matched, matched_id, time.monotonic() - start, not slot,
                                            found[1] if found else None, found[0].id if found else None))

    def _slot(self, window: WaitWindow) -> AbstractContextManager[bool]:
        """A wait slot (False when every one is taken); a window of 0 waits for nothing and needs none."""
        return self.slots.held() if window.seconds > 0 else nullcontext(True)

    def answer_after_wait(self, entries: list[TaskEntry], window: WaitWindow, from_run: bool,
                          client_gone: Callable[[], bool] = never_gone,
                          watches: Sequence[tuple[str, ov.Watch]] = (), wait_for: str | None = None,
                          operator: bool = False, view: ov.ViewRequest | None = None, shows: bool = True,
                          cancel: Cancellation | None = None, progress: ProgressReporter = NO_PROGRESS,
                          wait_on: list[TaskEntry] | None = None, every: bool = False) -> Outcome:
        """`run`'s and `status`'s answer: the wait (the caller registered as a waiter of each entry under the
        lock), then the view of the task that ended it (or the first).

        A caller that hung up or cancelled will never read the result: it is left as the completion todo
        instead of counting as seen (and no cursor moves); so is a result only an operator saw."""
        ended_before = {e.id for e in entries if e.task.ended}  # (read without the lock: a race only costs a stat)

        def finish(tasks: LockedTasks, waited: Waited) -> tuple[Waited, TaskEntry, Snapshot, dict[str, int] | None]:
            tasks.agent.done_waiting(entries, from_run, (lambda: True) if operator else client_gone)
            first = next((e for e in entries if e.id in (waited.matched_id, waited.asking_id) or e.task.ended),
                         entries[0])
            sizes = _end_sizes(first) if first.id not in ended_before else None
            return waited, first, self._snapshot(tasks, first.id), sizes

        waited, first, snap, sizes = self.wait(entries, window, finish, watches=watches, wait_for=wait_for,
                                               cancel=cancel, progress=progress, wait_on=wait_on, every=every,
                                               asking=True)
        truncated = [f"{task_id} {w.source.stream}" for task_id, w in watches if w.truncated]
        earlier = _earlier_match(watches) if wait_for is not None and waited.matched is None else (None, None)
        asked = waited.asking if waited.asking_id == first.id else None
        return Outcome(self._read(first.id, snap, view, shows and not client_gone(), from_run, sizes, asked), window,
                       waited.seconds, wait_skipped=waited.skipped, wait_for=wait_for, matched=waited.matched,
                       matched_id=waited.matched_id, truncated=truncated, notices=self.notices,
                       earlier=earlier[0], earlier_id=earlier[1], first_answer=from_run)

    def _lingering(self, entries: list[TaskEntry]) -> bool:
        """Processes an ended task's shell started still run (they may still write its output)."""
        return any(self.ops.is_alive(p) for e in entries if e.task.ended for p in list(e.leftovers))

    def sources(self, task_id: str) -> list[ov.Source]:
        return [ov.Source("stdout", self.store.file(task_id, "out")),
                ov.Source("stderr", self.store.file(task_id, "err"))]

    def view(self, task_id: str, request: ov.ViewRequest | None = None, shows: bool = False,
             settle: Callable[[LockedTasks, str], None] | None = None, brief: bool = False) -> TaskSnapshot:
        """Snapshot under the lock; the output and leftover checks outside it (file and /proc reads). When
        the answer `shows` the agent the end of the output, its new_only cursor moves there. `settle` runs
        under the same lock first (run's short wait for a spawn). `brief`: run's `task started` answer, which
        shows the last few lines of a task that still runs."""
        with self.registry.locked() as tasks:
            if settle is not None:
                settle(tasks, task_id)
            snap = self._snapshot(tasks, task_id)
        return self._read(task_id, snap, request, shows, brief)

    def note_asking(self, view: TaskSnapshot, entry: TaskEntry, shows: bool, asked: Asking | None) -> None:
        """Whether the task waits for input (what the answer's wait found as `asked`, else one look; none for a
        task that takes none or has ended), and what it asks; an answer that `shows` it to the agent is that
        wait's notice."""
        if view.task.stdin == "null" or view.task.terminal:
            return
        if asked is None:
            asked = self.inputs.asking(entry)
            if asked is not None and shows:
                with self.registry.locked() as tasks:
                    tasks.agent.input_shown(entry, asked.key)
        view.asking = asked.prompt if asked is not None else None

    @staticmethod
    def _snapshot(tasks: LockedTasks, task_id: str) -> Snapshot:
        view = tasks.view(task_id)
        entry = tasks.get(task_id)
        return view, entry, list(entry.leftovers), dict(entry.seen_to)

    def _read(self, task_id: str, snap: Snapshot,
              request: ov.ViewRequest | None, shows: bool, brief: bool = False,
              sizes: dict[str, int] | None = None, asked: Asking | None = None) -> TaskSnapshot:
        """`sizes`: the outputs' sizes at the end this answer's wait saw (no stat of them again); `asked`: the
        wait for input this answer's wait found (else a running task that takes input is looked at)."""
        view, entry, leftovers, seen_to = snap
        self.note_asking(view, entry, shows, asked)
        if brief and not view.task.terminal:
            read_output(view, self.store, STARTED_VIEW, seen_to, STARTED_BYTES)
        else:
            read_output(view, self.store, request, seen_to, self.tail_bytes, sizes)
        output = view.output  # set by read_output
        if shows and (request is None or request.moves_cursor) and output is not None and any(
                seen_to.get(stream, 0) != offset for stream, offset in output.read_to.items()):
            with self.registry.locked() as tasks:  # (a cursor that does not move takes no lock: most answers)
                tasks.agent.shown_to(entry, output.read_to)
        if leftovers:
            alive = [p for p in leftovers if self.ops.is_alive(p)]
            view.leftovers = [p.pid for p in alive]
            if len(alive) != len(leftovers):
                with self.registry.locked() as tasks:
                    tasks.still_alive(entry, alive)
        return view


def _end_sizes(entry: TaskEntry) -> dict[str, int] | None:
    """The outputs' sizes taken at the entry's end, when nothing can have written since: no process of it is
    left (a leftover may still write), and no terminal whose copier might still be at work."""
    task = entry.task
    if not task.terminal or entry.leftovers or task.stdin == "tty":
        return None
    return entry.end_sizes


def _earlier_match(watches: Sequence[tuple[str, ov.Watch]]) -> tuple[ov.Line | None, str | None]:
    """A line that matches `wait_for` among what the agent was shown before the call (it ended no wait)."""
    for task_id, w in watches:
        line = w.earlier() if isinstance(w, ov.Watch) else None
        if line is not None:
            return line, task_id
    return None, None
