"""A task's life from the queue to its recorded end: the workers' hooks (runner.RunnerHooks) and the end.

Every change here is one step of the registry's state table (registry.LockedTasks), under its lock; the
handle wakes the waiters when it is released. Records are written after the lock is released, through
`store.RecordWriter` (see there for who writes which record when, and what a crash at each point leaves on
disk).
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

from common.config import BashSettings
from common.event_log import event
from common.humanize import human_bytes
from common.process_seam import ProcInfo
from common.waiting import Doorbell
from hivebash.disk.end_room import on_block_edge, output_sizes
from hivebash.disk.output_limit import OutputGuard
from hivebash.disk.records import RecordWriter
from hivebash.disk.spares import Spare
from hivebash.disk.state_quota import StateQuota, quota_bytes
from hivebash.errors import EngineError
from hivebash.processes.ops import TaskProcessOps
from hivebash.processes.reaper import OrphanReaper
from hivebash.processes.runner import Launcher, TaskRunner
from hivebash.processes.workers import WorkerPool
from hivebash.tasks.entry import TaskEntry
from hivebash.tasks.record import record_of
from hivebash.tasks.registry import Ended, TaskRegistry
from hivebash.tasks.states import ALIVE
from hivebash.tasks.task import Rusage, Task, exit_status

log = logging.getLogger(__name__)


def _refusal(directory: Path, exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return (f"cmd: not run: the state disk is full ({exc.strerror}): {directory} has no room for the task's "
                "record and its end. Free space there (old tasks' output files), then run it again")
    return f"cmd: cannot create the task's files in {directory}: {exc.strerror or exc}"


LOST_NOTE = "part of its terminal's output was dropped: the state disk was full (No space left on device)"


def _full_note(free: int | None) -> str | None:
    if free is None:
        return None
    return f"the state disk is full ({human_bytes(free)} free): its output may be cut short (No space left on device)"


class Lifecycle:
    """The runner hooks (runner.RunnerHooks): what happens to a task after `run` queued it."""

    def __init__(self, settings: BashSettings, registry: TaskRegistry, records: RecordWriter, reaper: OrphanReaper,
                 launcher: Launcher, workers: WorkerPool, wake: Doorbell, subreaper: bool, ops: TaskProcessOps):
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
        self.guard = OutputGuard(settings.max_output_bytes, self)  # keeps running tasks' outputs under the limit
        self.quota = StateQuota(quota_bytes(settings.max_state_bytes, records.store.state_dir), wake.ring)

    @property
    def closing(self) -> bool:
        """True once shutdown began (workers then leave the sweep of leftovers to shutdown's single sweep)."""
        return self.registry.closing

    def runner_for(self, task: Task) -> TaskRunner:
        return TaskRunner(task, self.store, self.reaper, self, self.settings.kill_grace, self.subreaper,
                          self.launcher, self.workers, self.ops)

    def write_pending(self, task: Task, spare: Spare | None = None) -> tuple[int, int]:
        """Files and the pending record, written outside the lock (status/kill/list never wait on this
        fsync) but before the task is queued, so no later record of it can be overtaken by this one; with
        room for the task's end reserved, or the run is refused whole. `spare`: the task's files, made ahead
        (spares.py). A bash-tasks/ removed under the daemon is made again and the files made there."""
        try:
            try:
                return self._files_and_pending(task, spare)
            except FileNotFoundError:  # bash-tasks/ removed: made again now, or earlier (with the spare in it)
                repaired = self.store.repair()
                if not repaired and spare is None:
                    raise
                if repaired:
                    self.rewrite_records()
                return self._files_and_pending(task, None)
        except BaseException as exc:
            self.records.own(task.id, None)
            with self.registry.locked() as tasks:
                tasks.unreserve(task.id)
            if isinstance(exc, OSError):
                raise EngineError(_refusal(self.store.dir, exc)) from None
            raise

    def _files_and_pending(self, task: Task, spare: Spare | None) -> tuple[int, int]:
        """Owning the id first waits for a write of a finished task of that name still in progress."""
        outputs: tuple[int, int] | None = (spare.out, spare.err) if spare is not None else None
        try:
            self.records.own(task.id, task)
            if outputs is None:  # no spare
                outputs = self.store.prepare(task.id)
            self.records.save_pending(task.id, record_of(task), spare.record_tmp if spare is not None else None,
                                      spare.next_tmp if spare is not None else None)
            return outputs
        except BaseException:
            for fd in outputs or ():
                os.close(fd)
            raise

    def rewrite_records(self) -> None:
        """Write every known task's record again (bash-tasks/ was made again: a crash must still find them)."""
        with self.registry.locked() as tasks:
            records = [(e.task, record_of(e.task)) for e in tasks.entries()]
        for task, record in records:
            self.persist(task, record)

    # ----- the workers' hooks ----------------------------------------------------------------------------

    def on_spawned(self, task: Task, pid: int, started_mono: float) -> None:
        with self.registry.locked() as tasks:
            tasks.spawned(task, pid, started_mono)
        self.guard.watch(task, self._outputs(task))
        event(log, "task_start", logging.DEBUG, task=task.id, pid=pid)  # its end is the notable event

    def on_still_running(self, task: Task) -> None:
        """The running record, written once the task has run for runner.RUNNING_RECORD_DELAY (see there), and
        the "running" todo of a task `run` answered as started. Most agent commands end sooner: their
        completion is then their only todo, instead of a running one replaced a moment later (two harness
        requests, two outbox lines; docs/performance.md)."""
        with self.registry.locked() as tasks:
            record = tasks.still_running(task)
        if record is not None:
            self.persist(task, record)

    def _outputs(self, task: Task) -> dict[str, str]:
        out = {"stdout": self.store.file(task.id, "out")}
        return out if task.stdin == "tty" else {**out, "stderr": self.store.file(task.id, "err")}

    # ----- the output guard's hooks (disk/output_limit.GuardHooks) ----------------------------------------

    def dropping(self, task: Task, stream: str, start: int, end: int, over: list | None = None) -> None:
        """The range is in the task from now on (views skip it); its first one is written to the record
        at once, so a restart finds it too (later ones reach it with the next record, at the end at last)."""
        with self.registry.locked() as tasks:
            first = stream not in (task.dropped or {})
            task.dropped = {**(task.dropped or {}), stream: [start, end, *(over or [self.settings.max_output_bytes])]}
            record = record_of(task) if first and task.state in ALIVE and tasks.current(task) else None
        if record is not None:
            self.persist(task, record)

    def running_bytes(self, on_disk: int) -> None:
        self.quota.running(on_disk)

    def prune_output(self, entry: TaskEntry, paths: list[str], reason: str) -> dict | None:
        """Empty a finished task's output files for space (--max-state-bytes); its record stays and says
        `reason`. Done under the registry's lock, so a task that took its name meanwhile keeps its files.
        Returns the record written, None when the entry is gone."""
        with self.registry.locked() as tasks:
            if tasks.current(entry.task) is not entry:
                return None
            for path in paths:
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    continue
                try:
                    os.ftruncate(fd, 0)
                finally:
                    os.close(fd)
            entry.task.output_pruned, entry.task.dropped = reason, None
            record = record_of(entry.task)
        self.persist(entry.task, record)
        return record

    def over_limit(self, task: Task, reason: str) -> None:
        """Stop the task (SIGKILL to its group; its end is `killed`, saying `reason`)."""
        with self.registry.locked() as tasks:
            entry = tasks.current(task)
            if entry is None or task.ended or task.stop_reason:
                return
            task.stop_reason = reason
            tasks.request_stop(entry, "SIGKILL")
        log.warning("task %s stopped: %s", task.id, reason)

    def persist(self, task: Task, record: dict, terminal: bool = False) -> str | None:
        """Write a record now, in order with the task's other records (a `terminal` one into the room reserved
        at its start); a failing disk must not stop the task's life cycle: it is logged, and the reason is
        returned (an end that is not saved is said by its answers and todo: TaskEntry.unsaved)."""
        try:
            try:
                self.records.save_now(task.id, task, record, terminal)
            except FileNotFoundError:  # bash-tasks/ removed under us (its reserved temp file with it)
                self.store.repair()
                self.records.save_now(task.id, task, record)
        except OSError as exc:
            log.error("cannot write the record of task %s: %s", task.id, exc)
            return exc.strerror or str(exc)
        return None

    def retry_unsaved(self) -> None:
        """Try again to save the ends that could not be saved (the housekeeper's full pass, every 30 s)."""
        with self.registry.locked() as tasks:
            records = [(e, record_of(e.task)) for e in tasks.entries() if e.unsaved]
        for entry, record in records:
            unsaved = self.persist(entry.task, record, terminal=True)
            with self.registry.locked() as tasks:
                if tasks.current(entry.task) is entry:
                    entry.unsaved = unsaved

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
                 failure: str | None = None, output_lost: bool = False) -> None:
        """`failure`: the worker could not supervise the task and stopped it (runner._stop_after_failure);
        `output_lost`: its terminal's copier dropped output for want of room (known exactly: said so, whatever
        the disk holds by now)."""
        code, signalled = exit_status(status)
        # The outputs' sizes, taken here for the answer that waits for this end (it reads them instead of a
        # stat of its own: Answers.wait). A program that cannot write its output mostly fails (echo, cat, yes:
        # exit 1); one that succeeds anyway (`yes || true`) left an output on a block's edge (end_room.py). Only
        # then is the disk looked at (one statvfs), so a task that succeeded costs nothing more.
        sizes = output_sizes({"stdout": self.store.file(task.id, "out"), "stderr": self.store.file(task.id, "err")})
        # before the end's record: its last range
        self.quota.ended(self.guard.finish(task, sizes, lambda: self._outputs(task)))
        looks = not output_lost and (code or signalled or on_block_edge(sizes))
        note = LOST_NOTE if output_lost else _full_note(self.store.room.disk_full() if looks else None)
        with self.registry.locked() as tasks:
            ended = tasks.ended(task, status, rusage, duration, leftovers, failure, note, sizes)
        self.record_ends([ended])

    # ----- the end ---------------------------------------------------------------------------------------

    def record_ends(self, ended: list[Ended]) -> None:
        """Write the terminal record of each task now `ending`, then tell the registry it is on disk (its
        waiters wake, its completion todo is decided, the next queued task starts)."""
        for task, entry, record in ended:
            unsaved = self.persist(task, record, terminal=True)
            _log_end(task, unsaved)
            with self.registry.locked() as tasks:
                if entry is not None:
                    entry.unsaved = unsaved  # said by every answer and the todo; retry_unsaved saves it later
                tasks.recorded(task, entry, self.runner_for)
                prune = tasks.finished_count() > self.settings.keep_tasks
            if prune or self.reaper.knows_any:  # otherwise the housekeeper would wake to find nothing to do
                self.wake.ring()


def _log_end(task: Task, unsaved: str | None) -> None:
    """The `task_end` event: how it ended, in the fields its record keeps (never its command or output)."""
    result = task.result
    if result is None:
        return
    event(log, "task_end", task=task.id, outcome=result.state or task.shown_state, exit_code=result.exit_code,
          signal=result.signal, seconds=result.duration, saved=unsaved is None)
