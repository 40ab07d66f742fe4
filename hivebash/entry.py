"""The engine's table of tasks: one `TaskEntry` per known task, holding the task and its runtime state.

Everything here is guarded by the engine's `tasks_changed` condition: every method whose name ends in
`_locked` must be called with it held. Dropping a task is dropping its entry: no other collection keyed by
its id is left to clear.
"""

from __future__ import annotations

import collections
import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from . import task as T
from .arguments import UnknownTask, check_id
from .processes import ProcInfo
from .runner import TaskRunner
from .task import Task
from .views import TaskView


@dataclass(eq=False)
class TaskEntry:
    """One task and what the engine knows about it while it lives in memory (none of this is persisted)."""

    task: Task
    runner: TaskRunner | None = None  # set from the moment it is taken from the queue until its end is handled
    leader_exited: bool = False  # its shell has exited: the group id is no longer signalled by kill()
    inline_waiters: int = 0  # calls waiting inline for its end: they deliver the result, not a todo
    seen: bool = False  # the agent has read its terminal result: no completion todo
    todo_open: bool = False  # a todo for it is on the agent's board
    leftovers: list[ProcInfo] = field(default_factory=list)  # its processes alive after it ended
    # Its terminal state is set but its terminal record is still being written: an inline wait does not answer
    # before the record is on disk (a quick task can end before its `run` even starts waiting).
    recording: bool = False
    # Where the agent has been shown each stream up to (byte offsets), for status(new_only): moved by the
    # agent's tails and new_only answers, never by an operator's.
    seen_to: dict[str, int] = field(default_factory=dict)
    spawn_waiters: int = 0  # `run(wait_seconds=0)` calls waiting a moment for the spawn, to answer `running`
    # `run` answered "started": the "running" todo goes out if the task still runs after
    # runner.RUNNING_RECORD_DELAY (Lifecycle.on_still_running); one that ends sooner gets only its completion.
    running_todo_due: bool = False

    @property
    def id(self) -> str:
        return self.task.id

    @property
    def ended_and_recorded(self) -> bool:
        return self.task.terminal and not self.recording


class TaskTable:
    """The known tasks by id, the pending queue in submission order, and the ids claimed by a `run` that is
    still writing its pending record."""

    def __init__(self):
        self._entries: dict[str, TaskEntry] = {}
        self._reserved: dict[str, Task] = {}
        self.queue: collections.deque[TaskEntry] = collections.deque()
        self.started: dict[str, TaskEntry] = {}  # taken from the queue and not ended yet (max_running counts them)
        self.seq = 0
        self.closing = False

    def get_locked(self, task_id: object) -> TaskEntry:
        """The entry of a checked id, or a refusal naming the field."""
        entry = self._entries.get(check_id(task_id))
        if entry is None:
            raise UnknownTask(f"id: no task {task_id!r} (list() shows the known tasks)")
        return entry

    def current_locked(self, task: Task) -> TaskEntry | None:
        """The entry of `task` if the task still owns its id (its name may have been reused since)."""
        entry = self._entries.get(task.id)
        return entry if entry is not None and entry.task is task else None

    def entries_locked(self) -> Iterator[TaskEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def taken_locked(self, task_id: str) -> Task | None:
        """The task holding `task_id`, registered or reserved."""
        entry = self._entries.get(task_id)
        return entry.task if entry is not None else self._reserved.get(task_id)

    def reserve_locked(self, task: Task) -> None:
        self._reserved[task.id] = task

    def unreserve_locked(self, task_id: str) -> None:
        del self._reserved[task_id]

    def add_locked(self, task: Task) -> TaskEntry:
        self._reserved.pop(task.id, None)
        entry = self._entries[task.id] = TaskEntry(task)
        return entry

    def forget_locked(self, entry: TaskEntry) -> None:
        if self._entries.get(entry.id) is entry:
            del self._entries[entry.id]

    def finished_count_locked(self) -> int:
        """Tasks neither queued nor started: what retention counts against keep_tasks."""
        return len(self._entries) - len(self.queue) - len(self.started)

    def view_locked(self, task_id: str) -> TaskView:
        """A snapshot of the task that now holds `task_id` (no tails: those are read outside the lock)."""
        entry = self._entries.get(task_id)
        if entry is None:  # pruned while the caller waited
            raise UnknownTask(f"id: no task {task_id!r} any more (retention pruned it)")
        return self.snapshot_locked(entry)

    def snapshot_locked(self, entry: TaskEntry) -> TaskView:
        task = entry.task
        snap = copy.copy(task)  # every field is a flat value or a result that is never changed once attached
        duration: float | None
        if task.state == T.RUNNING and task.started_mono is not None:
            duration = time.monotonic() - task.started_mono
        else:
            duration = task.result.duration if task.result else None
        position = None
        if task.state == T.PENDING:
            position = self.queue.index(entry) + 1 if entry in self.queue else 0
        return TaskView(snap, duration, position, leftovers=[p.pid for p in entry.leftovers])
