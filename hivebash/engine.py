"""The registry of bash tasks: run/status/kill/list and the daemon's start and shutdown.

The rooms (docs/design.md has the whole map): entry.py (one TaskEntry per task, the table and the queue),
lifecycle.py (from the queue to the recorded end: the workers' hooks), kill.py, answers.py (views and inline
waits), todo_rules.py (which todo each task gets), retention.py (pruning and the housekeeping thread),
recovery.py (what a start does with a previous daemon's tasks), process_ops.py (every process operation),
arguments.py (request checks).

One condition, `tasks_changed`, guards every TaskEntry, the table and the queue; every change of state is
followed by `notify_all`, so an inline wait wakes the moment its task ends. Nothing under that lock waits on
a disk, a new thread or another lock that a disk write holds: under load every such wait holds up every other
request and worker behind it.
"""

from __future__ import annotations

import builtins
import logging
import os
import random
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path

from common import waiting
from common.after_answer import after_answer
from common.call_progress import NO_PROGRESS, Cancellation
from common.config import BashSettings
from common.notices import Notices
from common.todos import NoTodos, Todos
from common.tools import never_gone
from common.waiting import WAIT_CAP_SECONDS, Doorbell, WaitSlots, cap_wait, wait_for

from . import inline_wait, recovery, retention
from . import output_views as ov
from . import task as T
from .answers import Answers
from .arguments import (
    MAX_CMD_BYTES,
    MAX_IDS,
    EngineError,
    UnknownTask,
    check_ids,
    check_list,
    check_name_argument,
    check_run,
    check_wait_for,
    check_wait_seconds,
)
from .entry import TaskEntry, TaskTable
from .kill import Killer
from .lifecycle import Ended, Lifecycle
from .process_ops import LinuxProcessOps, ProcessOps
from .reaper import OrphanReaper
from .records import RecordWriter, record_of
from .runner import Launcher
from .send import Sender, SendOutcome, prompt_watches
from .spares import SpareFiles
from .store import TaskStore
from .task import Task
from .task_input import NULL, check_stdin
from .todo_rules import TodoRules
from .views import KillOutcome, ManyOutcome, Outcome, TaskView
from .workers import WorkerPool

log = logging.getLogger(__name__)

SPAWN_GRACE = 0.05  # seconds run(wait_seconds=0) waits at most for the spawn of a task given a slot
RECORD_GRACE = 5.0  # seconds a status without a wait waits at most for a just-ended task's record (a disk write)
_SHUT_DOWN_PENDING = "interrupted: the daemon shut down before it started"


__all__ = ["MAX_CMD_BYTES", "MAX_IDS", "Engine", "EngineError", "UnknownTask"]


class Engine:
    """Bash tasks: submit, observe, stop, list. Thread-safe; one instance per daemon."""

    def __init__(self, settings: BashSettings, todos: Todos | None = None, *, subreaper: bool = False,
                 wait_cap: float = WAIT_CAP_SECONDS, env: dict[str, str] | None = None, ops: ProcessOps | None = None):
        self.settings = settings
        self.store = TaskStore(settings.state_dir, fsync=settings.fsync, fsync_window=settings.fsync_window,
                               shared=settings.share_group is not None)
        self.records = RecordWriter(self.store)
        self.subreaper = subreaper
        self.ops: ProcessOps = ops or LinuxProcessOps()  # every process operation of the engine and its workers
        self.wait_cap = wait_cap
        self._wake = Doorbell()  # rung by task ends and new orphan watches; must take no lock
        self.reaper = OrphanReaper(on_watch=self._wake.ring)
        self.default_cwd = os.getcwd()  # a task's cwd when none is given: the daemon's, which never changes
        self.notices = Notices.for_socket(settings.agent_socket)  # else no todo reaches the agent: answers say so
        # Ids and marker nonces need to be unique, not secret (a marker only names a task's processes to this
        # daemon). A generator seeded once from the OS makes them without a syscall: getrandom would give up the GIL
        # on every run() (scripts/bench.py throughput).
        self._ids = random.Random(secrets.randbits(128))
        self.slots = WaitSlots(settings.max_inline_waits)
        self.tasks_changed = threading.Condition(threading.Lock())  # guards the table and every entry
        self.table = TaskTable()
        self.todo_rules = TodoRules(todos or NoTodos(), self.store, lambda e: self.table.snapshot_locked(e).to_dict())
        self.lifecycle = Lifecycle(settings, self.tasks_changed, self.table, self.todo_rules, self.records,
                                   self.reaper, Launcher(env), WorkerPool("bash-worker"), self._wake, subreaper,
                                   self.ops)
        self.killer = Killer(settings, self.tasks_changed, self.table, self.lifecycle, self.reaper, self._wake,
                             subreaper, self.ops)
        self.answers = Answers(self.tasks_changed, self.table, self.todo_rules, self.store, self.ops, self.slots,
                               self.notices, settings.tail_bytes)
        self.sender = Sender(self.tasks_changed, self.table, self.answers, self.todo_rules, self.slots, wait_cap)
        self.spares = SpareFiles(self.store)
        self.retention = retention.Retention(settings, self.tasks_changed, self.table, self.todo_rules, self.records)
        self.housekeeper = retention.Housekeeper(self._wake, self.reaper, subreaper, self._our_markers,
                                                 self.retention.prune, lambda: self.table.closing)

    @property
    def todos(self) -> Todos:
        return self.todo_rules.todos

    # ----- life cycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Load the records, turn tasks that were pending/running into `interrupted` (recovery.py), apply
        retention, and start the housekeeping thread. Nothing else runs yet: no lock is needed."""
        tasks = self.store.load_all()
        stale = recovery.interrupt_stale(tasks, self.settings.kill_grace, self.ops)
        for t in tasks:
            self.table.add_locked(t)
            self.records.own(t.id, t)
            self.table.seq = max(self.table.seq, t.seq)
        for t in stale:
            self.records.save_now(t.id, t, record_of(t))
            self.todo_rules.completion_locked(self.table.get_locked(t.id))
        for t in tasks:
            # Whether the harness holds a todo of a task that ended before the restart is not known here (a
            # delivered todo leaves the outbox): assume it may, so the agent's status still clears it. A clear
            # of a todo the harness does not hold is acknowledged as a no-op.
            if t.terminal:
                self.table.get_locked(t.id).todo_open = True
        self.retention.prune()
        self.todo_rules.flush()
        self.housekeeper.start()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop everything this daemon started: running tasks as by a forced kill (recorded `interrupted`),
        pending ones cancelled (`interrupted`), leftovers of finished tasks killed."""
        with self.tasks_changed:
            self.table.closing = True
            ended = [self.lifecycle.end_without_process_locked(entry, T.INTERRUPTED, _SHUT_DOWN_PENDING)
                     for entry in self.table.queue]
            self.table.queue.clear()
            started = [e for e in self.table.started.values() if e.runner is not None]
            for entry in started:
                self.killer.signal_locked(entry, "SIGKILL")
            runners = [e.runner for e in started]
        self.lifecycle.record_ends(ended)
        deadline = time.monotonic() + timeout
        for r in runners:
            if r is not None:
                r.join(max(0.0, deadline - time.monotonic()))
        markers: dict[str, int | None] = {m: None for m in self._our_markers()}
        if markers:
            found = self.ops.find(markers, self.subreaper, leaders=self.reaper.leaders())
            procs = [p for ps in found.values() for p in ps]
            self.reaper.remember(procs)
            self.ops.stop(procs, force=True, deadline=time.monotonic() + 0.5)
        self.reaper.reap(self._our_markers)
        self.todo_rules.flush()
        self.spares.close()
        self.store.flusher.close()
        self._wake.ring()

    # ----- run ----------------------------------------------------------------------------------------

    # Too complex (C901) until run leaves Engine for its own module with the task registry (issue 24, item 1).
    def run(self, cmd: str, timeout_secs: float | None = None, wait_seconds: float | None = None,  # noqa: C901
            name: str | None = None, cwd: str | None = None, client_gone: Callable[[], bool] = never_gone,
            wait_for: str | None = None, stdin: str | None = None, cancel: Cancellation | None = None,
            progress=NO_PROGRESS) -> Outcome:
        """Submit `bash -c cmd`; wait inline up to the capped window (or until a line of its output matches
        `wait_for`); see todo_rules.py for todos. `client_gone()` says whether the caller hung up during the
        wait (then the result becomes a todo). `stdin`: "null", "pipe" or "tty" (task_input.py)."""
        req = check_run(cmd, timeout_secs, wait_seconds, cwd, self.default_cwd, self.wait_cap)
        check_wait_for(wait_for)
        kind = check_stdin(stdin)
        if name is not None:
            check_name_argument(name)
            self.spares.drop(name)
        spare = self.spares.take() if name is None else None
        nonce = f"{self._ids.getrandbits(64):016x}"
        candidate = spare.id if spare is not None else self._new_id()  # checked under the lock
        with self.tasks_changed:
            if self.table.closing:
                if spare is not None:
                    self.spares.discard(spare)
                raise EngineError("the daemon is shutting down: no new tasks")
            task_id = self._claim_id_locked(name, candidate)
            self.table.seq += 1
            task = Task(id=task_id, cmd=req.cmd, cwd=req.cwd, marker=f"{task_id}:{nonce}",
                        seq=self.table.seq, submitted_at=time.time(), timeout_secs=req.timeout_secs, stdin=kind)
            self.table.reserve_locked(task)  # the id is taken; no worker can see the task yet
        outputs = self.lifecycle.write_pending(task, spare)
        after_answer(self._make_spare)  # the files of a later run, made once this one's answer is sent
        window = req.window
        with self.tasks_changed:
            entry = self.table.add_locked(task)
            self.table.queue.append(entry)
            if window.seconds > 0:
                entry.inline_waiters += 1  # before any worker can end it: see Lifecycle.after_end
            ended: list[Ended] = []
            if self.table.closing:  # shutdown began while the record was written
                self.table.queue.remove(entry)
                ended.append(self.lifecycle.end_without_process_locked(entry, T.INTERRUPTED, _SHUT_DOWN_PENDING))
            starting = self.lifecycle.start_queued_locked()
            if window.seconds <= 0 and entry in self.table.queue:
                self.todo_rules.running_locked(entry, queued=True)
            elif window.seconds <= 0:
                entry.running_todo_due = True  # sent once it has run a moment (Lifecycle.on_still_running)
            if window.seconds <= 0 and any(r.task is task for r in starting):
                entry.spawn_waiters += 1
        self.lifecycle.record_ends(ended)
        self.lifecycle.hand_outputs(task, outputs, starting)
        self.lifecycle.start_runners(starting)
        if window.seconds <= 0:
            if entry.spawn_waiters:
                self._await_spawn(entry)
            return Outcome(self.answers.view(task_id, shows=True), window, 0.0, notices=self.notices)
        watches = (inline_wait.watches_for([entry], self.answers.sources, wait_for, from_start=True) if kind == NULL
                   else prompt_watches(entry, self.sender.sources(entry), wait_for, from_start=True)) if wait_for else []
        return self.answers.wait([entry], window, from_run=True, client_gone=client_gone, watches=watches,
                                 wait_for=wait_for, cancel=cancel, progress=progress)

    def _new_id(self) -> str:
        return f"{self._ids.getrandbits(32):08x}"

    def _make_spare(self) -> None:
        """The files of a later run (spares.py), made once this run's answer is sent. The id is chosen under the
        lock, where `_claim_id_locked` also looks at the spares, so a spare and a task never share one."""
        with self.tasks_changed:
            task_id = self._new_id()
            while self.table.taken_locked(task_id) is not None or self.spares.holds(task_id):
                task_id = self._new_id()
            if not self.spares.reserve(task_id):
                return
        self.spares.make(task_id)

    def _await_spawn(self, entry: TaskEntry) -> None:
        """A task given a slot just now is spawned within milliseconds: answer `running` rather than `pending`
        (waits at most SPAWN_GRACE; lifecycle.on_spawned notifies only when someone waits here)."""
        with self.tasks_changed:
            wait_for(self.tasks_changed, lambda: entry.task.state != T.PENDING, SPAWN_GRACE)
            entry.spawn_waiters -= 1

    def _claim_id_locked(self, name: str | None, candidate: str) -> str:
        """A fresh hex id (`candidate` unless taken), or `name` if valid and free (a finished task of that
        name is replaced)."""
        if name is None:
            task_id = candidate
            while self.table.taken_locked(task_id) is not None or self.spares.holds(task_id):
                task_id = self._new_id()
            return task_id
        if self.spares.holds(name):  # being made as a spare right now (run dropped any made before)
            raise EngineError(f"name: {name!r} is being set up for another task this instant; run again, or choose another name")
        old = self.table.taken_locked(name)
        if old is not None:
            if not old.terminal:
                raise EngineError(f"name: task {name!r} is still {old.state}; wait for it, kill it, or choose another name")
            self._forget_locked(self.table.get_locked(name))
        return name

    def _forget_locked(self, entry: TaskEntry) -> None:
        """Drop a finished task from memory (its files are replaced by the caller)."""
        self.table.forget_locked(entry)
        self.todo_rules.forget_locked(entry)

    # ----- status, waits ------------------------------------------------------------------------------------

    def status(self, task_id: str | None = None, wait_seconds: float | None = None,
               client_gone: Callable[[], bool] = never_gone, *, ids: list[str] | None = None,
               wait_for: str | None = None, view: ov.ViewRequest | None = None,
               operator: bool = False, cancel: Cancellation | None = None, progress=NO_PROGRESS) -> Outcome | ManyOutcome:
        """One task (`task_id`), or several (`ids`: the wait ends when the first ends). `view` chooses what of
        the output the answer shows. An `operator`'s status is not the agent's read: it clears no todo and
        moves no new_only cursor."""
        check_wait_seconds(wait_seconds)
        check_wait_for(wait_for)
        wanted = check_ids(task_id, ids)
        window = cap_wait(wait_seconds, default=0.0, cap=self.wait_cap)
        with self.tasks_changed:
            entries = [self.table.get_locked(i) for i in wanted]
            registered = window.seconds > 0 and not any(e.ended_and_recorded for e in entries)
            if not registered:
                # An end is answered once its record is on disk, as an inline wait answers it: a daemon
                # killed right after the answer must not read `interrupted` at its next start.
                waiting.wait_for(self.tasks_changed, lambda: not any(e.recording for e in entries), RECORD_GRACE)
            for entry in entries:
                if registered:
                    entry.inline_waiters += 1
                elif entry.task.terminal and not operator:
                    self.todo_rules.hand_over_locked(entry, client_gone)
        shows = ids is None and not operator  # the answer shows the agent this task's output
        if registered:
            watches = self._watches(entries, wait_for) if wait_for else []
            outcome = self.answers.wait(entries, window, from_run=False, client_gone=client_gone, watches=watches,
                                 wait_for=wait_for, operator=operator, view=view, shows=shows, cancel=cancel,
                                 progress=progress)
        else:
            first = next((e for e in entries if e.task.terminal), entries[0])
            outcome = Outcome(self.answers.view(first.id, view, shows), window, 0.0, wait_for=wait_for, notices=self.notices)
        if ids is None:
            return outcome
        return ManyOutcome([self.answers.view(e.id, None, shows=False) for e in entries], outcome)

    def _watches(self, entries: list[TaskEntry], wait_for: str) -> list:
        """`wait_for` of a status: from the files' ends; a task that takes input also by its unfinished last
        line (a prompt)."""
        plain = [e for e in entries if e.task.stdin == NULL]
        watches = inline_wait.watches_for(plain, self.answers.sources, wait_for, from_start=False)
        for e in entries:
            if e.task.stdin != NULL:
                watches += prompt_watches(e, self.sender.sources(e), wait_for, from_start=False)
        return watches

    # ----- send ------------------------------------------------------------------------------------------------

    def send(self, task_id: str, text: str | None = None, keys: list[str] | None = None, enter: bool | None = None,
             eof: bool | None = None, wait_seconds: float | None = None, wait_for: str | None = None,
             client_gone: Callable[[], bool] = never_gone, operator: bool = False, cancel: Cancellation | None = None,
             progress=NO_PROGRESS) -> SendOutcome:
        """Write to a running task's input, then wait a moment for what it prints (send.py). An operator's send
        clears no todo and moves no new_only cursor."""
        return self.sender.send(task_id, text, keys, enter, eof, wait_seconds, wait_for, client_gone, operator,
                                cancel, progress)

    # ----- kill -----------------------------------------------------------------------------------------------

    def kill(self, task_id: str, force: bool = False) -> KillOutcome:
        """Fire-and-forget: cancel a pending task, signal a running one's group, or stop a finished
        task's leftover processes (kill.py). Never waits for the task to end."""
        action, message = self.killer.kill(task_id, force)
        return KillOutcome(self.answers.view(task_id), action, message)

    def shell_exited(self, task_id: str) -> bool:
        """True while the task's shell has exited and its worker stops what it left (for tests, diagnostics)."""
        with self.tasks_changed:
            return self.table.get_locked(task_id).leader_exited

    # ----- list ------------------------------------------------------------------------------------

    def list(self, state: str | None = None, limit: int | None = None) -> tuple[list[TaskView], int]:
        """Tasks newest first, optionally of one state; returns (views without tails, total matching)."""
        check_list(state, limit)
        with self.tasks_changed:
            entries = [e for e in sorted(self.table.entries_locked(), key=lambda e: e.task.seq, reverse=True)
                       if state is None or e.task.state == state]
            return [self.table.snapshot_locked(e) for e in entries[: limit or len(entries)]], len(entries)

    def _our_markers(self) -> set[str]:
        with self.tasks_changed:
            return {e.task.marker for e in self.table.entries_locked()}

    @property
    def closing(self) -> bool:
        return self.table.closing

    # ----- for tests and the daemon ---------------------------------------------------------------------------

    def task_ids(self) -> builtins.list[str]:  # (`list` in this class is the verb)
        with self.tasks_changed:
            return [e.id for e in self.table.entries_locked()]

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no task is pending or running (tests, shutdown paths)."""
        def idle() -> bool:
            return all(e.ended_and_recorded for e in self.table.entries_locked())
        with self.tasks_changed:
            return wait_for(self.tasks_changed, idle, timeout)

    @property
    def state_dir(self) -> Path:
        return self.store.state_dir
