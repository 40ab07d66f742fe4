"""A task's life from the queue to its recorded end: starting queued tasks, the workers' hooks, the end.

Every change of a task's state here goes through `task.transition` under the engine's `tasks_changed`
condition and ends with `notify_all`, so an inline wait wakes the moment its task ends (no polling). Records
are written after the lock is released, through `records.RecordWriter` (see there for who writes which record
when, and what a crash at each point leaves on disk).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import NamedTuple

from common.config import BashSettings
from common.waiting import Doorbell

from . import task as T
from .arguments import EngineError
from .entry import TaskEntry, TaskTable
from .process_ops import ProcessOps
from .processes import ProcInfo
from .reaper import OrphanReaper
from .records import RecordWriter, record_of
from .runner import Launcher, TaskRunner
from .spares import Spare
from .task import Rusage, Task, TaskResult
from .todo_rules import TodoRules
from .workers import WorkerPool

log = logging.getLogger(__name__)




class Ended(NamedTuple):
    """A task ended under the lock whose terminal record is still to be written (after the lock)."""

    entry: TaskEntry
    record: dict


class Lifecycle:
    """The runner hooks (runner.RunnerHooks) and the queue: what happens to a task after `run` queued it."""

    def __init__(self, settings: BashSettings, tasks_changed: threading.Condition, table: TaskTable,
                 rules: TodoRules, records: RecordWriter, reaper: OrphanReaper, launcher: Launcher,
                 workers: WorkerPool, wake: Doorbell, subreaper: bool, ops: ProcessOps):
        self.settings = settings
        self.tasks_changed = tasks_changed
        self.table = table
        self.rules = rules
        self.records = records
        self.store = records.store
        self.reaper = reaper
        self.launcher = launcher
        self.workers = workers
        self.wake = wake
        self.subreaper = subreaper
        self.ops = ops

    @property
    def closing(self) -> bool:
        """True once shutdown began (workers then leave the sweep of leftovers to shutdown's single sweep)."""
        return self.table.closing

    def write_pending(self, task: Task, spare: Spare | None = None) -> tuple[int, int]:
        """Files and the pending record, written outside the lock (status/kill/list never wait on this
        fsync) but before the task is queued, so no later record of it can be overtaken by this one. Owning
        the id first waits for a write of a finished task of that name still in progress. `spare`: the task's
        files, made ahead (spares.py)."""
        outputs: tuple[int, int] | None = (spare.out, spare.err) if spare is not None else None
        next_tmp = spare.next_tmp if spare is not None else None  # until RecordWriter holds it
        try:
            self.records.own(task.id, task)
            if outputs is None:  # no spare
                outputs = self.store.prepare(task.id)
            self.records.save_now(task.id, task, record_of(task), spare.record_tmp if spare is not None else None)
            if next_tmp is not None:
                self.records.made_next(task.id, next_tmp)
            return outputs
        except BaseException as exc:
            for fd in outputs or ():
                os.close(fd)
            if next_tmp is not None:  # (its file is removed with the other temp files at the next start)
                os.close(next_tmp[0])
            self.records.own(task.id, None)
            with self.tasks_changed:
                self.table.unreserve_locked(task.id)
            if isinstance(exc, OSError):
                raise EngineError(f"cmd: cannot create the task's files in {self.store.dir}: {exc.strerror or exc}") from None
            raise

    # ----- the queue -------------------------------------------------------------------------------------

    def start_queued_locked(self) -> list[TaskRunner]:
        """Take queued tasks, in submission order, while fewer than max_running are started or running; the
        caller starts the returned runners after releasing the lock (`start_runners`): a thread's start waits
        for the new thread to run, and under load that held every caller of the lock."""
        table, runners = self.table, []
        while table.queue and len(table.started) < self.settings.max_running and not table.closing:
            entry = table.queue.popleft()
            entry.runner = TaskRunner(entry.task, self.store, self.reaper, self, self.settings.kill_grace,
                                      self.subreaper, self.launcher, self.workers, self.ops)
            table.started[entry.id] = entry
            runners.append(entry.runner)
        return runners

    @staticmethod
    def start_runners(runners: list[TaskRunner]) -> None:
        for runner in runners:
            runner.start()

    @staticmethod
    def hand_outputs(task: Task, outputs: tuple[int, int], starting: list[TaskRunner]) -> None:
        """The output files `run` just created go to the task's worker if it starts now (it would open them
        again), else they are closed (a queued task's worker opens them when it starts)."""
        mine = next((r for r in starting if r.task is task), None)
        if mine is not None:
            mine.outputs = outputs
        else:
            for fd in outputs:
                os.close(fd)

    # ----- the workers' hooks ----------------------------------------------------------------------------

    def on_spawned(self, task: Task, pid: int, started_mono: float) -> None:
        with self.tasks_changed:
            task.pid = pid
            task.started_mono, task.started_at = started_mono, time.time()
            T.transition(task, T.RUNNING)  # pending -> running
            entry = self.table.current_locked(task)
            if entry is not None and entry.spawn_waiters:  # only then: other waits are for ended tasks
                self.tasks_changed.notify_all()
            if task.kill_signal and task.pgid is not None:  # killed while it was being started
                self.ops.signal_group(task.pgid, getattr(signal, task.kill_signal))

    def on_still_running(self, task: Task) -> None:
        """The running record, written once the task has run for runner.RUNNING_RECORD_DELAY (see there), and
        the "running" todo of a task `run` answered as started. Most agent commands end sooner: their
        completion is then their only todo, instead of a running one replaced a moment later (two harness
        requests, two outbox lines; docs/performance.md)."""
        with self.tasks_changed:
            if task.state != T.RUNNING:
                return
            record = record_of(task)
            entry = self.table.current_locked(task)
            if entry is not None and entry.running_todo_due:
                entry.running_todo_due = False
                self.rules.running_locked(entry, queued=False)
        self.rules.flush()
        self.persist(task, record)

    def persist(self, task: Task, record: dict) -> None:
        """Write a record now, in order with the task's other records; a failing disk must not stop the
        task's life cycle (it is logged, and the state stays right in memory)."""
        try:
            self.records.save_now(task.id, task, record)
        except OSError as exc:
            log.error("cannot write the record of task %s: %s", task.id, exc)

    def on_spawn_failed(self, task: Task, error: str) -> None:
        with self.tasks_changed:
            if task.state == T.PENDING:
                T.transition(task, T.RUNNING)  # pending -> running: the start was tried
            if task.state == T.RUNNING:  # running -> done, exit 127 as bash says for a command it cannot run
                T.transition(task, T.DONE, TaskResult(ended_at=time.time(), duration=0.0, exit_code=127,
                                                      note=f"failed to start: {error}"))
            entry = self.table.current_locked(task)
            if entry is not None:
                entry.recording = True
            record = record_of(task)
        self.persist(task, record)
        self.after_end(task, entry)

    def on_deadline(self, task: Task) -> bool:
        with self.tasks_changed:
            if task.kill_signal == "SIGKILL":
                return False
            task.timed_out = True
            return True

    def on_leader_exited(self, task: Task) -> None:
        with self.tasks_changed:
            entry = self.table.current_locked(task)
            if entry is not None:
                entry.leader_exited = True  # from now on the group id is not signalled by kill()

    def on_ended(self, task: Task, status: int, rusage: Rusage, duration: float, leftovers: list[ProcInfo],
                 failure: str | None = None) -> None:
        """`failure`: the worker could not supervise the task and stopped it (runner._stop_after_failure)."""
        code, signalled = T.exit_status(status)
        with self.tasks_changed:
            note: str | None
            if self.table.closing:
                state, note = T.INTERRUPTED, "interrupted: the daemon shut down"
            elif failure:
                state, note = T.KILLED, f"killed: {failure}"
            else:
                state, note = T.end_state(task, signalled)
            # running -> done | timed_out | killed | interrupted
            T.transition(task, state, TaskResult(ended_at=time.time(), duration=duration, exit_code=code,
                                                 signal=signalled, rusage=rusage, note=note))
            entry = self.table.current_locked(task)
            if entry is not None:
                if leftovers:
                    entry.leftovers = leftovers
                entry.recording = True
            record = record_of(task)
        self.persist(task, record)
        self.after_end(task, entry)

    # ----- the end ---------------------------------------------------------------------------------------

    def after_end(self, task: Task, entry: TaskEntry | None) -> None:
        """Wake the waiters, send the completion todo unless a waiter delivers the result, start the next."""
        table = self.table
        with self.tasks_changed:
            if entry is not None:
                entry.recording = False
                entry.runner = None
                entry.leader_exited = False
                if table.started.get(task.id) is entry:  # else its name was reused: the id is the new task's
                    del table.started[task.id]
            self.tasks_changed.notify_all()
            if entry is not None and not entry.inline_waiters and table.current_locked(task) is entry:
                self.rules.completion_locked(entry)
            starting = self.start_queued_locked()
            prune = table.finished_count_locked() > self.settings.keep_tasks
        self.start_runners(starting)
        self.rules.flush()
        if prune or self.reaper.knows_any:  # otherwise the housekeeper would wake to find nothing to do
            self.wake.ring()

    def end_without_process_locked(self, entry: TaskEntry, state: str, note: str) -> Ended:
        """pending -> killed/interrupted: no process ever ran. The caller hands the result to `record_ends`
        once it has released the lock (the record is written there, not under the lock)."""
        task = entry.task
        T.transition(task, state, TaskResult(ended_at=time.time(), duration=None, note=note))  # pending -> killed | interrupted
        entry.recording = True  # inline waits answer once the record is written
        return Ended(entry, record_of(task))

    def record_ends(self, ended: list[Ended]) -> None:
        """Write the terminal record of each task ended without a process, then tell its waiters."""
        for entry, record in ended:
            self.persist(entry.task, record)
            self.after_end(entry.task, entry)
