"""`AgentSide`: what the agent is told of each task, the part of `registry.LockedTasks` reached as `tasks.agent`
(so under the registry's lock only): its todos (built in todo_rules.py, made when the handle is released),
the inline waits that deliver a result instead of a todo, and what the agent was shown of the output."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from hivebash.tasks import task as T
from hivebash.tasks.entry import TaskEntry
from hivebash.tasks.todo_rules import TodoCalls, completion_todo, running_todo

if TYPE_CHECKING:
    from hivebash.disk.store import TaskStore


class AgentSide:
    """Writes an entry's `inline_waiters`, `spawn_waiters`, `running_todo_due`, `seen`, `todo_open` and
    `seen_to`; nothing else does."""

    def __init__(self, wait: Callable[[Callable[[], bool], float], bool], store: TaskStore, todos: TodoCalls,
                 view_of: Callable[[TaskEntry], dict]):
        self._wait = wait  # LockedTasks.wait: the table's lock is held by the caller
        self._store = store
        self._todos = todos
        self._view_of = view_of  # the completion todo's data: the task's view

    def wait_inline(self, entries: list[TaskEntry]) -> None:
        """A call is about to wait inline for `entries`: it delivers their result, not a todo."""
        for entry in entries:
            entry.inline_waiters += 1

    def running_todo_later(self, entry: TaskEntry) -> None:
        """`run` answered "started": the "running" todo goes out if it still runs after a moment (`still_running`)."""
        entry.running_todo_due = True

    def expect_spawn(self, entry: TaskEntry) -> None:
        """A `run(wait_seconds=0)` will wait a moment for the spawn (`await_spawn`): `spawned` then wakes it."""
        entry.spawn_waiters += 1

    def await_spawn(self, entry: TaskEntry, seconds: float) -> None:
        self._wait(lambda: entry.task.state not in (T.PENDING, T.STARTING), seconds)
        entry.spawn_waiters -= 1

    def done_waiting(self, entries: list[TaskEntry], from_run: bool, client_gone: Callable[[], bool]) -> None:
        """The inline wait of a call registered in `entries` is over: its answer delivers an ended task's result
        (unless the caller hung up), or `run`'s "running" todo follows."""
        for entry in entries:
            entry.inline_waiters -= 1
            if entry.task.ended:
                self.hand_over(entry, client_gone)
            elif from_run:
                self.todo_running(entry, queued=entry.task.state == T.PENDING)

    def shown_to(self, entry: TaskEntry, read_to: dict[str, int]) -> None:
        entry.seen_to.update(read_to)

    def moved_on(self, entry: TaskEntry, offsets: dict[str, int], read_to: dict[str, int]) -> None:
        """After a send: the agent has now seen each stream to where the answer read it, if it had seen it up
        to the write (else new_only would lose what came between)."""
        for stream, start in offsets.items():
            if entry.seen_to.get(stream, 0) >= start and stream in read_to:
                entry.seen_to[stream] = read_to[stream]

    def todo_running(self, entry: TaskEntry, queued: bool) -> None:
        if entry.task.ended or entry.todo_open:
            return
        entry.todo_open = True
        self._todos.upsert(running_todo(entry, queued, self._store))

    def todo_completion(self, entry: TaskEntry) -> None:
        if entry.seen:
            return
        entry.todo_open = True
        self._todos.upsert(completion_todo(entry, self._store, self._view_of(entry)))

    def hand_over(self, entry: TaskEntry, client_gone: Callable[[], bool]) -> None:
        """An ended task's result is about to be answered: the answer delivers it, unless the caller hung up, in
        which case the completion todo carries it."""
        if client_gone():
            self.todo_completion(entry)
        else:
            entry.seen = True  # no todo for it, and an open one is cleared
            self.clear_todo(entry)

    def may_hold_todo(self, entry: TaskEntry) -> None:
        """A task that ended before a restart: the harness may still hold its todo (a delivered one leaves the
        outbox), so the agent's status still clears it; a clear of a todo it does not hold is a no-op."""
        entry.todo_open = True

    def clear_todo(self, entry: TaskEntry) -> None:
        if entry.todo_open:
            entry.todo_open = False
            self._todos.clear(entry.id)
