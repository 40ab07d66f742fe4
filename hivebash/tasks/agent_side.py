"""`AgentSide`: what the agent is told of each task, the part of `registry.LockedTasks` reached as `tasks.agent`
(so under the registry's lock only): its todos (built in todo_rules.py, made when the handle is released),
the inline waits that deliver a result instead of a todo, and what the agent was shown of the output."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from hivebash.tasks import task as T
from hivebash.tasks.entry import TaskEntry
from hivebash.tasks.todo_rules import TodoCalls, asking_todo, completion_todo, running_todo

if TYPE_CHECKING:
    from hivebash.disk.store import TaskStore

# A client that polled an ended task's handle within this many of its poll intervals is taken to be polling
# still: its poll delivers the end, and the completion todo waits HOLD_POLLS intervals for it before it is sent.
RECENT_POLLS = 3
HOLD_POLLS = 2


class AgentSide:
    """Writes an entry's `inline_waiters`, `spawn_waiters`, `running_todo_due`, `seen`, `todo_open`, `seen_to`
    and its client fields (`client_polled_at`, `todo_held`, ...); nothing else does."""

    def __init__(self, wait: Callable[[Callable[[], bool], float], bool], store: TaskStore, todos: TodoCalls,
                 view_of: Callable[[TaskEntry], dict], clock: Callable[[], float] = time.monotonic):
        self._wait = wait  # LockedTasks.wait: the table's lock is held by the caller
        self._store = store
        self._todos = todos
        self._view_of = view_of  # the completion todo's data: the task's view
        self._clock = clock
        # The registry's `locked()` (set by TaskRegistry): a held todo's timer takes the lock to send it.
        self.locked: Callable[[], AbstractContextManager[Any]] | None = None

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

    def client_will_track(self, entry: TaskEntry) -> None:
        """A client of the tasks extension asked for it: if it outlives the wait the client shows it running,
        so no "running" todo says it again."""
        entry.client_tracks = True

    def todo_running(self, entry: TaskEntry, queued: bool) -> None:
        if entry.task.ended or entry.todo_open or entry.client_tracks:
            return
        entry.todo_open = True
        self._todos.upsert(running_todo(entry, queued, self._store))

    def input_looked(self, entry: TaskEntry, key: tuple | None, prompt: str) -> None:
        """A look of the input watch at a task no call waits on: waiting for input (`key`: which wait) or not
        (None). A new wait updates its todo to say so, once; a wait answered makes it the "running" one again."""
        if key is None:
            self.input_answered(entry)
            return
        if entry.told_asking == key or entry.task.ended:
            return
        entry.told_asking = key
        if entry.inline_waiters:  # the waiting call's answer says it
            return
        entry.asking_todo = entry.todo_open = True
        self._todos.upsert(asking_todo(entry, prompt))

    def input_shown(self, entry: TaskEntry, key: tuple) -> None:
        """An answer told the agent the task waits for input (that wait needs no todo)."""
        entry.told_asking = key

    def input_answered(self, entry: TaskEntry) -> None:
        """Input was sent, or the task reads no more: a "waits for input" todo is the "running" one again."""
        if entry.asking_todo:
            entry.asking_todo = False
            if not entry.task.ended:
                self._todos.upsert(running_todo(entry, False, self._store))

    def todo_completion(self, entry: TaskEntry) -> None:
        """The completion todo, unless the end was seen; a client's own stop needs none (it knows); for a client
        polling the task's handle, held a moment for the poll that delivers the end (`release_held`)."""
        if entry.seen:
            return
        if entry.task.client_cancelled:
            self.hand_over(entry, lambda: False)
            return
        polled, interval = entry.client_polled_at, entry.client_poll_interval
        if polled is not None and self._clock() - polled <= RECENT_POLLS * interval and self.locked is not None:
            entry.todo_held = True
            self._todos.later(HOLD_POLLS * interval, lambda: self.release_held(entry))
            return
        self._send_completion(entry)

    def _send_completion(self, entry: TaskEntry) -> None:
        entry.todo_open, entry.asking_todo = True, False
        self._todos.upsert(completion_todo(entry, self._store, self._view_of(entry)))

    def release_held(self, entry: TaskEntry) -> None:
        """A held completion todo's wait is over (called without the lock): sent unless a poll delivered the end
        meanwhile, or the task is gone."""
        assert self.locked is not None
        with self.locked() as tasks:
            if entry.todo_held and not entry.seen and tasks.current(entry.task) is entry:
                entry.todo_held = False
                self._send_completion(entry)

    def client_polled(self, entry: TaskEntry, interval: float) -> None:
        """A client's poll of the task's handle; it was told to poll again in `interval` seconds."""
        entry.client_polled_at, entry.client_poll_interval = self._clock(), interval

    def client_delivered(self, entry: TaskEntry) -> bool:
        """A client's poll returns the end: the end counts as delivered (a held or open todo goes). True when the
        model had been shown the end before the first such poll (a status, kill or send answer)."""
        if entry.client_saw_before is None:
            entry.client_saw_before = entry.seen
        entry.todo_held = False
        self.hand_over(entry, lambda: False)
        return entry.client_saw_before

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
            entry.todo_open = entry.asking_todo = False
            self._todos.clear(entry.id)
