"""What `run`, `status` and `kill` answer with: a task's view (snapshot, output, leftovers still alive) and
the inline wait before it. The snapshot is taken under the engine's `tasks_changed`; the files and /proc are
read after it is released."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from common.call_progress import NO_PROGRESS, Cancellation
from common.notices import Notices
from common.tools import never_gone
from common.waiting import WaitSlots, WaitWindow

from . import inline_wait
from . import output_views as ov
from .entry import TaskEntry, TaskTable
from .process_ops import ProcessOps
from .store import TaskStore
from .todo_rules import TodoRules
from .views import Outcome, TaskView, read_output
from .wait_progress import WaitTelling


class Answers:
    """Views and inline waits over the engine's table (methods take `tasks_changed` themselves)."""

    def __init__(self, tasks_changed: threading.Condition, table: TaskTable, todo_rules: TodoRules,
                 store: TaskStore, ops: ProcessOps, slots: WaitSlots, notices: Notices, tail_bytes: int):
        self.tasks_changed = tasks_changed
        self.table = table
        self.todo_rules = todo_rules
        self.store = store
        self.ops = ops
        self.slots = slots
        self.notices = notices  # todos reach the agent: answers may promise one
        self.tail_bytes = tail_bytes  # per stream, of a plain tail

    def wait(self, entries: list[TaskEntry], window: WaitWindow, from_run: bool,
              client_gone: Callable[[], bool] = never_gone, watches=(), wait_for: str | None = None,
              operator: bool = False, view: ov.ViewRequest | None = None, shows: bool = True,
              cancel: Cancellation | None = None, progress=NO_PROGRESS) -> Outcome:
        """Inline wait (the caller registered as a waiter of each entry under the lock). No free slot: answer
        at once. A cancel ends it at once; a client that asked for progress gets it meanwhile.

        A caller that hung up or cancelled will never read the result: it is left as the completion todo
        instead of counting as seen (and no cursor moves); so is a result only an operator saw."""
        skipped = not self.slots.try_acquire()
        start = time.monotonic()
        matched, matched_id = None, None
        try:
            if not skipped:
                telling = (WaitTelling(self.tasks_changed, entries, self.sources, wait_for, time.monotonic)
                           if progress.wanted else None)
                matched, matched_id = inline_wait.wait_any(self.tasks_changed, entries, window.seconds, time.monotonic,
                                                           list(watches), cancel=cancel, progress=progress,
                                                           telling=telling)
            with self.tasks_changed:
                for entry in entries:
                    entry.inline_waiters -= 1
                    if entry.task.terminal:
                        self.todo_rules.hand_over_locked(entry, (lambda: True) if operator else client_gone)
                    elif from_run:
                        self.todo_rules.running_locked(entry, queued=entry in self.table.queue)
                waited = time.monotonic() - start
        finally:
            if not skipped:
                self.slots.release()
        first = next((e for e in entries if e.id == matched_id or e.task.terminal), entries[0])
        truncated = [f"{task_id} {w.source.stream}" for task_id, w in watches if w.truncated]
        return Outcome(self.view(first.id, view, shows and not client_gone()), window, waited, wait_skipped=skipped, wait_for=wait_for,
                       matched=matched, matched_id=matched_id, truncated=truncated, notices=self.notices)

    def sources(self, task_id: str) -> list[ov.Source]:
        return [ov.Source("stdout", self.store.file(task_id, "out")), ov.Source("stderr", self.store.file(task_id, "err"))]

    def view(self, task_id: str, request: ov.ViewRequest | None = None, shows: bool = False) -> TaskView:
        """Snapshot under the lock; the output and leftover checks outside it (file and /proc reads). When
        the answer `shows` the agent the end of the output, its new_only cursor moves there."""
        self.todo_rules.flush()
        with self.tasks_changed:
            view = self.table.view_locked(task_id)
            entry = self.table.get_locked(task_id)
            leftovers = list(entry.leftovers)
            seen_to = dict(entry.seen_to)
        read_output(view, self.store, request, seen_to, self.tail_bytes)
        output = view.output  # set by read_output
        if shows and (request is None or request.moves_cursor) and output is not None and output.read_to:
            with self.tasks_changed:
                entry.seen_to.update(output.read_to)
        if leftovers:
            alive = [p for p in leftovers if self.ops.is_alive(p)]
            view.leftovers = [p.pid for p in alive]
            if len(alive) != len(leftovers):
                with self.tasks_changed:
                    entry.leftovers = alive
        return view
