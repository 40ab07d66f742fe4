"""A task's life from the queue to its recorded end: the workers' hooks (runner.RunnerHooks) and the end.

Every change here is one step of the registry's state table (registry.LockedTasks), under its lock; the
handle wakes the waiters when it is released. Records are written after the lock is released, through
`store.RecordWriter` (see there for who writes which record when, and what a crash at each point leaves on
disk).
"""

from __future__ import annotations

import logging
import os

from common.config import BashSettings
from common.waiting import Doorbell

from .arguments import EngineError
from .process_ops import ProcessOps
from .processes import ProcInfo
from .reaper import OrphanReaper
from .records import RecordWriter, record_of
from .registry import Ended, TaskRegistry
from .runner import Launcher, TaskRunner
from .spares import Spare
from .task import Rusage, Task
from .workers import WorkerPool

log = logging.getLogger(__name__)


class Lifecycle:
    """The runner hooks (runner.RunnerHooks): what happens to a task after `run` queued it."""

    def __init__(self, settings: BashSettings, registry: TaskRegistry, records: RecordWriter, reaper: OrphanReaper,
                 launcher: Launcher, workers: WorkerPool, wake: Doorbell, subreaper: bool, ops: ProcessOps):
        self.settings = settings
        self.registry = registry
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
        return self.registry.closing

    def runner_for(self, task: Task) -> TaskRunner:
        return TaskRunner(task, self.store, self.reaper, self, self.settings.kill_grace, self.subreaper,
                          self.launcher, self.workers, self.ops)

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
            with self.registry.locked() as tasks:
                tasks.unreserve(task.id)
            if isinstance(exc, OSError):
                raise EngineError(f"cmd: cannot create the task's files in {self.store.dir}: {exc.strerror or exc}") from None
            raise

    # ----- the workers' hooks ----------------------------------------------------------------------------

    def on_spawned(self, task: Task, pid: int, started_mono: float) -> None:
        with self.registry.locked() as tasks:
            tasks.spawned(task, pid, started_mono)

    def on_still_running(self, task: Task) -> None:
        """The running record, written once the task has run for runner.RUNNING_RECORD_DELAY (see there), and
        the "running" todo of a task `run` answered as started. Most agent commands end sooner: their
        completion is then their only todo, instead of a running one replaced a moment later (two harness
        requests, two outbox lines; docs/performance.md)."""
        with self.registry.locked() as tasks:
            record = tasks.still_running(task)
        if record is not None:
            self.persist(task, record)

    def persist(self, task: Task, record: dict) -> None:
        """Write a record now, in order with the task's other records; a failing disk must not stop the
        task's life cycle (it is logged, and the state stays right in memory)."""
        try:
            self.records.save_now(task.id, task, record)
        except OSError as exc:
            log.error("cannot write the record of task %s: %s", task.id, exc)

    def on_spawn_failed(self, task: Task, error: str) -> None:
        with self.registry.locked() as tasks:
            ended = tasks.spawn_failed(task, error)
        if ended is not None:
            self.record_ends([ended])

    def on_deadline(self, task: Task, kill_at: float) -> bool:
        with self.registry.locked() as tasks:
            return tasks.deadline_passed(task, kill_at)

    def on_leader_exited(self, task: Task, exited_at: float) -> bool:
        with self.registry.locked() as tasks:
            return tasks.leader_exited(task, exited_at + self.settings.kill_grace)

    def on_ended(self, task: Task, status: int, rusage: Rusage, duration: float, leftovers: list[ProcInfo],
                 failure: str | None = None) -> None:
        """`failure`: the worker could not supervise the task and stopped it (runner._stop_after_failure)."""
        with self.registry.locked() as tasks:
            ended = tasks.ended(task, status, rusage, duration, leftovers, failure)
        self.record_ends([ended])

    # ----- the end ---------------------------------------------------------------------------------------

    def record_ends(self, ended: list[Ended]) -> None:
        """Write the terminal record of each task now `ending`, then tell the registry it is on disk (its
        waiters wake, its completion todo is decided, the next queued task starts)."""
        for task, entry, record in ended:
            self.persist(task, record)
            with self.registry.locked() as tasks:
                tasks.recorded(task, entry, self.runner_for)
                prune = tasks.finished_count() > self.settings.keep_tasks
            if prune or self.reaper.knows_any:  # otherwise the housekeeper would wake to find nothing to do
                self.wake.ring()
