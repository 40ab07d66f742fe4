"""The one owner of the task table: its lock, its entries, and every change to a task or its entry.

Holding the lock is visible: the table is reached only through `with registry.locked() as tasks:`, which
yields the `LockedTasks` (as pueue hands its handlers a `&mut LockedState`). Every method of `LockedTasks`
(and of `tasks.agent`, agent_side.py: todos, inline waits, what the agent was shown) runs with the lock held,
so none carries a `_locked` suffix; nothing else writes a `TaskEntry` or a task's state.

Releasing the handle does, in this order: wake every waiter if a task changed (still under the lock), then,
after the lock is released, start the runners that `start_queued` took from the queue (a thread's start
waits for the new thread to run) and make the todo calls decided under the lock (the todo object may write
its outbox). Nothing under the lock waits on a disk, a new thread or another lock that a disk write holds:
under load every such wait holds up every other request and worker behind it.
"""

from __future__ import annotations

import collections
import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from common.process_seam import ProcInfo
from common.protocol.call_progress import Cancellation
from common.waiting import wait_for
from hivebash.errors import UnknownTask
from hivebash.tasks import task as T
from hivebash.tasks.agent_side import AgentSide
from hivebash.tasks.entry import TaskEntry
from hivebash.tasks.record import record_of
from hivebash.tasks.snapshot import TaskSnapshot
from hivebash.tasks.task import Stop, Task, TaskResult, check_id
from hivebash.tasks.todo_rules import TodoCalls

if TYPE_CHECKING:
    from hivebash.disk.store import TaskStore
    from hivebash.processes.ops import TaskProcessOps
    from hivebash.processes.runner import TaskRunner


class Ended(NamedTuple):
    """A task now `ending` whose terminal record is still to be written (after the lock). `entry` is None when
    the task no longer owns its id (its name was reused)."""

    task: Task
    entry: TaskEntry | None
    record: dict


class TaskRegistry:
    """The lock and the table; `locked()` is the only way in."""

    def __init__(self, store: TaskStore, ops: TaskProcessOps, todos: TodoCalls, max_running: int):
        self._changed = threading.Condition(threading.Lock())
        self._tasks = LockedTasks(self._changed, store, ops, todos, max_running)
        self._handle = _Handle(self._changed, self._tasks, todos)
        self._tasks.agent.locked = self.locked

    def locked(self) -> _Handle:
        """`with registry.locked() as tasks:` holds the lock for the block (memory work only)."""
        return self._handle

    def wakes_on(self, cancel: Cancellation | None) -> contextlib.AbstractContextManager[None]:
        """While inside (entered without the lock): a cancel of the call wakes its waits on the registry."""
        return cancel.wakes(self._changed) if cancel is not None else contextlib.nullcontext()

    @property
    def closing(self) -> bool:
        """A hint read without the lock (one attribute read): shutdown has begun."""
        return self._tasks.closing


class _Handle:
    """The context manager of `TaskRegistry.locked`; one per registry (it keeps nothing between uses)."""

    __slots__ = ("_cond", "_tasks", "_todos")

    def __init__(self, cond: threading.Condition, tasks: LockedTasks, todos: TodoCalls):
        self._cond, self._tasks, self._todos = cond, tasks, todos

    def __enter__(self) -> LockedTasks:
        self._cond.acquire()
        return self._tasks

    def __exit__(self, *exc: object) -> None:
        tasks = self._tasks
        try:
            if tasks.changed:
                tasks.changed = False
                if tasks.waiting:  # (a notify with nobody waiting still costs ~25 instructions of threading.py)
                    self._cond.notify_all()
            starting, tasks.starting = tasks.starting, []
        finally:
            self._cond.release()
        for runner in starting:
            runner.start()
        self._todos.flush()


class LockedTasks:
    """The table (entries by id, the pending queue, the started tasks, ids reserved by a `run` still writing
    its pending record) and every change to it; only ever reached through `TaskRegistry.locked()`."""

    def __init__(self, cond: threading.Condition, store: TaskStore, ops: TaskProcessOps, todos: TodoCalls,
                 max_running: int):
        self._cond = cond
        self._store = store
        self._ops = ops
        self._max_running = max_running
        self.agent = AgentSide(self.wait, store, todos, lambda e: self.snapshot(e).to_dict())
        self._entries: dict[str, TaskEntry] = {}
        self._reserved: dict[str, Task] = {}
        self.queue: collections.deque[TaskEntry] = collections.deque()
        self.started: dict[str, TaskEntry] = {}  # taken from the queue and not ended yet (max_running counts them)
        self.seq = 0
        self.closing = False
        self.changed = False  # a task changed: the handle wakes every waiter when it is released
        self.waiting = 0  # calls inside `wait` now (the only way to wait on the table's condition)
        self.starting: list[TaskRunner] = []  # taken from the queue: the handle starts them after the lock

    # ----- the table ----------------------------------------------------------------------------------------

    def get(self, task_id: object) -> TaskEntry:
        """The entry of a checked id, or a refusal naming the field."""
        entry = self._entries.get(check_id(task_id))
        if entry is None:
            raise UnknownTask(f"id: no task {task_id!r} (list() shows the known tasks)")
        return entry

    def current(self, task: Task) -> TaskEntry | None:
        """The entry of `task` if the task still owns its id (its name may have been reused since)."""
        entry = self._entries.get(task.id)
        return entry if entry is not None and entry.task is task else None

    def entries(self) -> Iterator[TaskEntry]:
        return iter(self._entries.values())

    def taken(self, task_id: str) -> Task | None:
        """The task holding `task_id`, registered or reserved."""
        entry = self._entries.get(task_id)
        return entry.task if entry is not None else self._reserved.get(task_id)

    def reserve(self, task: Task) -> None:
        self._reserved[task.id] = task

    def unreserve(self, task_id: str) -> None:
        del self._reserved[task_id]

    def next_seq(self) -> int:
        """The submission order of a new task."""
        self.seq += 1
        return self.seq

    def add(self, task: Task) -> TaskEntry:
        self._reserved.pop(task.id, None)
        self.seq = max(self.seq, task.seq)
        entry = self._entries[task.id] = TaskEntry(task)
        return entry

    def forget(self, entry: TaskEntry) -> None:
        """Drop a finished task from memory (its files go with retention, or are replaced by a reused name)."""
        if self._entries.get(entry.id) is entry:
            del self._entries[entry.id]
        self.agent.clear_todo(entry)

    def finished_count(self) -> int:
        """Tasks neither queued nor started: what retention counts against keep_tasks."""
        return len(self._entries) - len(self.queue) - len(self.started)

    def view(self, task_id: str) -> TaskSnapshot:
        """A snapshot of the task that now holds `task_id` (no tails: those are read outside the lock)."""
        entry = self._entries.get(task_id)
        if entry is None:  # pruned while the caller waited
            raise UnknownTask(f"id: no task {task_id!r} any more (retention pruned it)")
        return self.snapshot(entry)

    def snapshot(self, entry: TaskEntry) -> TaskSnapshot:
        task = entry.task
        snap = T.shallow_copy(task)  # every field is a flat value or a result that is never changed once attached
        snap.state = task.shown_state
        duration: float | None
        if snap.state == T.RUNNING and task.started_mono is not None:
            duration = time.monotonic() - task.started_mono
        else:
            duration = task.result.duration if task.result else None
        position = None
        if task.state in (T.PENDING, T.STARTING):
            position = self.queue.index(entry) + 1 if task.state == T.PENDING else 0
        return TaskSnapshot(snap, duration, position, leftovers=[p.pid for p in entry.leftovers], unsaved=entry.unsaved)

    def wait(self, predicate: Callable[[], bool], seconds: float) -> bool:
        """Wait (the lock is released meanwhile) until `predicate()` or `seconds` pass; the predicate. Every
        wait on the table goes through here: the handle wakes waiters only while `waiting` counts some."""
        self.waiting += 1
        try:
            return wait_for(self._cond, predicate, seconds)
        finally:
            self.waiting -= 1

    # ----- a task's life ------------------------------------------------------------------------------------

    def enqueue(self, entry: TaskEntry) -> None:
        self.queue.append(entry)

    def start_queued(self, runner_for: Callable[[Task], TaskRunner]) -> list[TaskRunner]:
        """Take queued tasks, in submission order, while fewer than max_running are started or running
        (pending -> starting); the handle starts their runners once the lock is released."""
        runners = []
        while self.queue and len(self.started) < self._max_running and not self.closing:
            entry = self.queue.popleft()
            T.transition(entry.task, T.STARTING)  # pending -> starting
            entry.runner = runner_for(entry.task)
            self.started[entry.id] = entry
            runners.append(entry.runner)
        self.starting.extend(runners)
        return runners

    def spawned(self, task: Task, pid: int, started_mono: float) -> None:
        task.pid = pid
        task.started_mono, task.started_at = started_mono, time.time()
        T.transition(task, T.RUNNING)  # starting -> running
        entry = self.current(task)
        if entry is not None and entry.spawn_waiters:  # only then: other waits are for ended tasks
            self.changed = True
        if task.kill_signal:  # killed while it was being started
            self._stopping(task, task.kill_signal, None)
            self._ops.signal_group(task.pid, getattr(signal, task.kill_signal))

    def still_running(self, task: Task) -> dict | None:
        """The running record to write (None once the task has stopped running), and its "running" todo if
        `run` answered it as started."""
        if task.state not in T.ALIVE:
            return None
        entry = self.current(task)
        if entry is not None and entry.running_todo_due:
            entry.running_todo_due = False
            self.agent.todo_running(entry, queued=False)
        return record_of(task)

    def spawn_failed(self, task: Task, error: str) -> Ended | None:
        """starting -> ending (done, exit 127, as bash says for a command it cannot run)."""
        if task.state != T.STARTING:
            return None
        result = TaskResult(ended_at=time.time(), duration=0.0, exit_code=127, note=f"failed to start: {error}",
                            state=T.DONE)
        return self._ending(task, result)

    def deadline_passed(self, task: Task, kill_at: float) -> bool:
        """The timeout: False if a forced kill is under way already; else the task is stopping (SIGTERM now,
        SIGKILL at `kill_at`)."""
        if task.kill_signal == "SIGKILL":
            return False
        task.timed_out = True
        self._stopping(task, "SIGTERM", kill_at)
        return True

    def leader_exited(self, task: Task, kill_at: float) -> bool:
        """Its shell exited (still unreaped): running -> exited, or stopping -> sweeping (what it left gets
        SIGKILL at `kill_at` unless a timeout's deadline came first). From now on kill does not signal its
        group id. True when a stop was asked (the worker sweeps)."""
        if task.state == T.STOPPING:
            stop = task.stop
            if stop is not None and stop.deadline is None:
                task.stop = Stop(stop.signal, stop.asked_at, kill_at)
            T.transition(task, T.SWEEPING)  # stopping -> sweeping
            return True
        T.transition(task, T.EXITED)  # running -> exited
        return False

    def ended(self, task: Task, status: int, rusage: T.Rusage, duration: float, leftovers: list[ProcInfo],
              failure: str | None, disk_note: str | None = None, sizes: dict[str, int] | None = None) -> Ended:
        """The worker saw the end (reaped): -> ending; the caller writes the record, then calls `recorded`.
        `failure`: the worker could not supervise the task and stopped it (runner._stop_after_failure);
        `disk_note`: the state disk was full at the end (Lifecycle.on_ended), added to the note; `sizes`: its
        outputs' sizes at the end, for the answer that waits for it (TaskEntry.end_sizes)."""
        code, signalled = T.exit_status(status)
        note: str | None
        if self.closing:
            state, note = T.INTERRUPTED, "interrupted: the daemon shut down"
        elif failure:
            state, note = T.KILLED, f"killed: {failure}"
        else:
            state, note = T.end_state(task, signalled)
        if disk_note is not None:
            note = f"{note}; {disk_note}" if note else disk_note
        ended = self._ending(task, TaskResult(ended_at=time.time(), duration=duration, exit_code=code,
                                              signal=signalled, rusage=rusage, note=note, state=state))
        if ended.entry is not None:
            if leftovers:
                ended.entry.leftovers = leftovers
            ended.entry.end_sizes = sizes
        return ended

    def end_without_process(self, entry: TaskEntry, state: str, note: str) -> Ended:
        """pending -> ending (killed/interrupted): no process ever ran. The caller hands the result to
        `Lifecycle.record_ends` once the lock is released."""
        return self._ending(entry.task, TaskResult(ended_at=time.time(), duration=None, note=note, state=state))

    def cancel(self, entry: TaskEntry, state: str, note: str) -> Ended:
        """Take a pending task off the queue and end it without a process."""
        self.queue.remove(entry)
        return self.end_without_process(entry, state, note)

    def _ending(self, task: Task, result: TaskResult) -> Ended:
        T.transition(task, T.ENDING, result)  # -> ending: inline waits answer once the record is written
        return Ended(task, self.current(task), record_of(task))

    def recorded(self, task: Task, entry: TaskEntry | None, runner_for: Callable[[Task], TaskRunner]) -> None:
        """Its terminal record is on disk: ending -> done | timed_out | killed | interrupted; wake the waiters,
        decide the completion todo unless a waiter delivers the result, start the next."""
        assert task.result is not None and task.result.state is not None  # attached with `ending`
        T.transition(task, task.result.state)  # ending -> its end
        if entry is not None:
            entry.runner = None
            if self.started.get(task.id) is entry:  # else its name was reused: the id is the new task's
                del self.started[task.id]
            if not entry.inline_waiters and self.current(task) is entry:
                self.agent.todo_completion(entry)
        self.changed = True
        self.start_queued(runner_for)

    def request_stop(self, entry: TaskEntry, sig: str) -> None:
        """Record a kill and signal the group while its shell runs (the recorded pgid: the unreaped leader
        holds it); wake the worker. A task not spawned yet gets the signal once it is (`spawned`)."""
        task = entry.task
        if task.kill_signal != "SIGKILL":
            task.kill_signal = sig
        if task.state in T.ALIVE and task.pgid is not None:
            self._stopping(task, sig, task.stop.deadline if task.stop else None)
            self._ops.signal_group(task.pgid, getattr(signal, sig))
        if entry.runner is not None:
            entry.runner.poke()

    def _stopping(self, task: Task, sig: str, deadline: float | None) -> None:
        if task.state == T.RUNNING:
            T.transition(task, T.STOPPING)  # running -> stopping
        task.stop = Stop(sig, time.monotonic(), deadline)

    def still_alive(self, entry: TaskEntry, alive: list[ProcInfo]) -> None:
        """Its leftovers, less those found gone."""
        entry.leftovers = alive
