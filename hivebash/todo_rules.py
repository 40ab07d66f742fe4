"""Which todo each task gets (todos keyed by task id), per docs/tools/bash.md:

- `run` that returns `task started` upserts a "running" todo once the task has run for a moment
  (runner.RUNNING_RECORD_DELAY; a queued task's at once); the completion replaces it with the summary, or is
  the only todo of a task that ended sooner;
- a result the agent has already seen (an inline wait or any `status` that observed the terminal task)
  creates no todo, and clears one that is open;
- tasks found `pending`/`running` at start become `interrupted`, with one best-effort todo each.

The rules are decided under the engine's lock (they read and set the entry's `seen`/`todo_open`); the calls
they decide are queued and made after it, in the same order, because the todo object may write its outbox
to disk and no tool call may wait on that.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

from common.humanize import one_line
from common.todos import Todos

from .entry import TaskEntry
from .store import TaskStore
from .views import still_alive_line

log = logging.getLogger(__name__)


def _leftovers_line(entry: TaskEntry) -> str:
    return still_alive_line(entry.id, [p.pid for p in entry.leftovers]) + "\n" if entry.leftovers else ""


class TodoRules:
    """Decides each task's todos (methods ending in `_locked`: under the engine's lock) and delivers them."""

    def __init__(self, todos: Todos, store: TaskStore, data_of: Callable[[TaskEntry], dict]):
        self.todos = todos
        self.store = store
        self._data_of = data_of  # the completion todo's data: the task's view (called under the engine's lock)
        self._pending_lock = threading.Lock()  # guards _pending
        self._pending: collections.deque[tuple[str, tuple]] = collections.deque()
        self._delivering = threading.Lock()  # held by the one thread delivering the pending calls

    def running_locked(self, entry: TaskEntry, queued: bool) -> None:
        task = entry.task
        if task.terminal or entry.todo_open:
            return
        what = "queued" if queued else "running"
        out, err = self.store.file(task.id, "out"), self.store.file(task.id, "err")
        body = (f"bash task {task.id} is {what}: {one_line(task.cmd, 200)}\n"
                f"Output so far: Read({out})" + ("" if task.stdin == "tty" else f" and Read({err})") +
                f". Check it with status(id=\"{task.id}\"); "
                "its completion will replace this todo.")
        entry.todo_open = True
        self._queue("upsert", task.id, f"bash {task.id} {what}: {one_line(task.cmd, 60)}", body,
                    {"id": task.id, "status": task.state})

    def completion_locked(self, entry: TaskEntry) -> None:
        if entry.seen:
            return
        task, r = entry.task, entry.task.result
        facts = [f"status={task.state}"]
        if r and r.exit_code is not None:
            facts.append(f"exit_code={r.exit_code}")
        if r and r.signal:
            facts.append(f"signal={r.signal}")
        if r and r.duration is not None:
            facts.append(f"duration={r.duration:.2f}s")
        if entry.leftovers:
            facts.append(f"leftover_processes={len(entry.leftovers)}")
        out, err = self.store.file(task.id, "out"), self.store.file(task.id, "err")
        body = (f"bash task {task.id} finished: {' '.join(facts)}\n"
                f"command: {one_line(task.cmd, 200)}\n" + (f"note: {r.note}\n" if r and r.note else "") +
                _leftovers_line(entry) +
                (f"output (a terminal: stderr included): Read({out})\n" if task.stdin == "tty" else
                 f"stdout: Read({out})\nstderr: Read({err})\n") +
                f"status(id=\"{task.id}\") shows the tails and clears this todo.")
        entry.todo_open = True
        self._queue("upsert", task.id, f"bash {task.id} {' '.join(facts)}: {one_line(task.cmd, 60)}", body,
                    self._data_of(entry))

    def hand_over_locked(self, entry: TaskEntry, client_gone: Callable[[], bool]) -> None:
        """A terminal result is about to be answered: the answer delivers it, unless the caller hung up, in
        which case the completion todo carries it."""
        if client_gone():
            self.completion_locked(entry)
        else:
            self.observed_locked(entry)

    def observed_locked(self, entry: TaskEntry) -> None:
        """The caller is about to hand a terminal result to the agent: no todo for it, and clear an open one."""
        entry.seen = True
        self.forget_locked(entry)

    def forget_locked(self, entry: TaskEntry) -> None:
        """The task leaves memory (or was seen): clear its open todo."""
        if entry.todo_open:
            entry.todo_open = False
            self._queue("clear", entry.id)

    def _queue(self, op: str, *args) -> None:
        with self._pending_lock:
            self._pending.append((op, args))

    def flush(self) -> None:
        """Deliver queued todo calls in decision order, outside the engine's lock, one deliverer at a time.

        A caller that finds another deliverer at work leaves at once: that deliverer takes its calls too (they
        are queued before this is called), so no tool call queues behind another call's outbox write."""
        if not self._pending:  # a hint read without the lock: whoever queues a call flushes after it
            return
        while True:
            if not self._delivering.acquire(blocking=False):
                return
            try:
                while True:
                    with self._pending_lock:
                        calls, self._pending = self._pending, collections.deque()
                    if not calls:
                        break
                    for op, args in calls:
                        try:
                            getattr(self.todos, op)(*args)
                        except Exception:  # a todo must never break a tool call or a worker
                            log.exception("todo %s failed", op)
            finally:
                self._delivering.release()
            with self._pending_lock:  # a call queued after our last look, whose producer saw the lock held
                if not self._pending:
                    return
