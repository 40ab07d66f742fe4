"""The registry of bash tasks: run/status/kill/list semantics, the pending queue, inline waits and todos.

One lock (a Condition) guards every task's state; every change of state goes through `task.transition`
under it and ends with `notify_all`, so an inline wait wakes the moment its task ends (no polling).
Nothing under that lock waits on a disk, a new thread or another lock that a disk write holds: under load
(scripts/bench.py, 8 clients) every such wait held up every other request and worker behind it.
Records go through `store.RecordWriter`, which orders the writes of each id: the pending record by `run`
(before any worker can see the task), the running record by the worker once the task has run for a moment
(runner.RUNNING_RECORD_DELAY), the terminal record by the thread that ended the task, before any waiter is
told (see RecordWriter for what a crash at each point leaves on disk).

Todos (keyed by task id) follow the seed page (docs/tools/bash.md):
- `run` that returns `task started` upserts a "running" todo; the completion replaces it with the summary;
- a result the agent has already seen (an inline wait or any `status` that observed the terminal task)
  creates no todo, and clears one that is open;
- tasks found `pending`/`running` at start become `interrupted`, with one best-effort todo each.
"""

from __future__ import annotations

import collections
import copy
import logging
import os
import random
import secrets
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from common.config import BashSettings
from common.names import InvalidName, check_name
from common.todos import NoTodos, Todos
from common.waiting import WAIT_CAP_SECONDS, Doorbell, WaitSlots, WaitWindow, cap_wait, wait_for
from common.tools import never_gone

from . import task as T
from .processes import ProcInfo, find_processes, is_alive, stop_processes
from .reaper import OrphanReaper
from .runner import Launcher, TaskRunner
from .workers import WorkerPool
from .store import RecordWriter, Tail, TaskStore, record_of
from .task import Rusage, Task, TaskResult

log = logging.getLogger(__name__)

MAX_CMD_BYTES = 64 * 1024  # the schema says characters; the engine checks the encoded size too
HOUSEKEEPING_INTERVAL = 30.0  # seconds between retention/reaping passes when nothing wakes the thread


class EngineError(ValueError):
    """A request the engine refuses; the message names the field and the rule (shown to the caller as is)."""


class UnknownTask(EngineError):
    pass


def shorten(text: str, limit: int = 80) -> str:
    """One line of at most `limit` characters, for summaries and tables."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass
class TaskView:
    """A consistent snapshot of one task, taken under the lock, plus its output tails."""

    task: Task
    duration: float | None
    queue_position: int | None = None
    stdout: Tail | None = None
    stderr: Tail | None = None
    leftovers: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        t, r = self.task, self.task.result
        data: dict[str, Any] = {
            "id": t.id,
            "status": t.state,
            "cmd": t.cmd,
            "cwd": t.cwd,
            "exit_code": r.exit_code if r else None,
            "signal": r.signal if r else None,
            "duration": None if self.duration is None else round(self.duration, 3),
            "timeout_secs": t.timeout_secs,
            "submitted_at": t.submitted_at,
            "started_at": t.started_at,
            "ended_at": r.ended_at if r else None,
            "pid": t.pid,
            "note": r.note if r else None,
            "rusage": None,
            "leftover_pids": list(self.leftovers),
        }
        if r and r.rusage:
            data["rusage"] = {
                "cpu_seconds": round(r.rusage.cpu_seconds, 3),
                "cpu_user": round(r.rusage.cpu_user, 3),
                "cpu_system": round(r.rusage.cpu_system, 3),
                "max_rss_bytes": r.rusage.max_rss_bytes,
                "max_rss_exact": r.rusage.max_rss_exact,
            }
        if self.queue_position is not None:
            data["queue_position"] = self.queue_position
        if self.stdout is not None:
            data["stdout"] = self.stdout.to_dict()
        if self.stderr is not None:
            data["stderr"] = self.stderr.to_dict()
        return data


@dataclass
class Outcome:
    """What `run` or `status` answers: the view, and how the inline wait went."""

    view: TaskView
    window: WaitWindow
    waited: float
    wait_skipped: bool = False  # every wait slot was taken: answered at once


@dataclass
class KillOutcome:
    view: TaskView
    action: str  # "cancelled", "signalled", "leftovers", "nothing"
    message: str


class Engine:
    """Bash tasks: submit, observe, stop, list. Thread-safe; one instance per daemon."""

    def __init__(self, settings: BashSettings, todos: Todos | None = None, *, subreaper: bool = False,
                 wait_cap: float = WAIT_CAP_SECONDS, env: dict[str, str] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self.store = TaskStore(settings.state_dir, fsync=settings.fsync, fsync_window=settings.fsync_window)
        self.records = RecordWriter(self.store)
        self.todos = todos or NoTodos()
        self.subreaper = subreaper
        self.wait_cap = wait_cap
        self.clock = clock
        self._wake = Doorbell()  # rung by task ends and new orphan watches; must take no lock
        self.reaper = OrphanReaper(on_watch=self._wake.ring)
        self.launcher = Launcher(env)
        self.default_cwd = os.getcwd()  # a task's cwd when none is given: the daemon's, which never changes
        # Ids and marker nonces need to be unique, not secret (a marker only names a task's processes to this
        # daemon). A generator seeded once from the OS makes them without a syscall: getrandom gave up the GIL
        # on every run() (scripts/bench.py throughput).
        self._ids = random.Random(secrets.randbits(128))
        self.workers = WorkerPool("bash-worker")
        self.slots = WaitSlots(settings.max_inline_waits)
        self._cond = threading.Condition(threading.Lock())
        self._tasks: dict[str, Task] = {}
        self._reserved: dict[str, Task] = {}  # ids claimed by a `run` still writing the pending record
        self._runners: dict[str, TaskRunner] = {}
        self._queue: collections.deque[str] = collections.deque()
        self._starting_or_running: set[str] = set()
        self._leader_exited: set[str] = set()
        self._inline_waiters: collections.Counter[str] = collections.Counter()
        self._seen: set[str] = set()  # terminal results the agent has seen: no completion todo
        self._todo_open: set[str] = set()
        self._leftovers: dict[str, list[ProcInfo]] = {}
        # Tasks whose terminal state is set but whose terminal record is still being written: an inline wait
        # does not answer before the record is on disk (a worker from the pool can end a quick task before
        # its `run` even starts waiting; seen as a `pending` record after an inline `done`).
        self._recording: dict[str, Task] = {}
        self._seq = 0
        self._closing = False
        # Todo calls decided under the lock, made after it in the same order (the todo delivery may write
        # its outbox to disk: status/kill must never wait on that).
        self._todo_ops: collections.deque[tuple[str, tuple]] = collections.deque()
        self._todo_lock = threading.Lock()
        self._housekeeper: threading.Thread | None = None

    # ----- life cycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Load the records, turn tasks that were pending/running into `interrupted` (stopping any of their
        processes still alive), apply retention, and start the housekeeping thread."""
        tasks = self.store.load_all()
        stale = [t for t in tasks if t.state in T.ACTIVE]
        alive = self._stop_stale_processes(stale) if stale else set()
        now = time.time()
        for t in tasks:
            self._tasks[t.id] = t
            self.records.own(t.id, t)
            self._seq = max(self._seq, t.seq)
        for t in stale:
            # A pending record whose processes were found alive ran: its running record was still queued.
            ran = t.pid is not None or t.marker in alive
            T.transition(t, T.INTERRUPTED, TaskResult(ended_at=now, duration=None,
                                                      note="interrupted: the daemon stopped while the task was " + (
                                                          "running" if ran else "pending")))
            self.records.save_now(t.id, t, record_of(t))
            self._upsert_completion(t)
        self._prune()
        self._flush_todos()
        self._housekeeper = threading.Thread(target=self._housekeeping, name="bash-housekeeping", daemon=True)
        self._housekeeper.start()

    def _stop_stale_processes(self, stale: list[Task]) -> set[str]:
        """Processes of tasks from a previous daemon: identified by their marker (a random nonce per task)
        and a start time not before the task was submitted, then SIGKILLed as by a forced kill. Returns the
        markers of the tasks that had any."""
        found = find_processes({t.marker: None for t in stale}, descendants_only=False)
        by_marker = {t.marker: t for t in stale}
        victims = [p for m, procs in found.items() for p in procs if p.create_time >= by_marker[m].submitted_at - 1.0]
        if victims:
            log.warning("stopping %d leftover process(es) of interrupted tasks", len(victims))
            stop_processes(victims, force=True, deadline=time.monotonic() + self.settings.kill_grace)
        return {p.marker for p in victims}

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop everything this daemon started: running tasks as by a forced kill (recorded `interrupted`),
        pending ones cancelled (`interrupted`), leftovers of finished tasks killed."""
        with self._cond:
            self._closing = True
            while self._queue:
                t = self._tasks[self._queue.popleft()]
                self._end_without_process(t, T.INTERRUPTED, "interrupted: the daemon shut down before it started")
            runners = list(self._runners.values())
            for r in runners:
                self._signal_locked(r.task, "SIGKILL")
        deadline = time.monotonic() + timeout
        for r in runners:
            r.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            markers = {t.marker: None for t in self._tasks.values()}
        if markers:
            found = find_processes(markers, self.subreaper, leaders=self.reaper.leaders())
            procs = [p for ps in found.values() for p in ps]
            self.reaper.remember(procs)
            stop_processes(procs, force=True, deadline=time.monotonic() + 0.5)
        self.reaper.reap(self._our_markers)
        self._flush_todos()
        self.store.flusher.close()
        self._wake.ring()

    # ----- run ----------------------------------------------------------------------------------------

    def run(self, cmd: str, timeout_secs: float | None = None, wait_seconds: float | None = None,
            name: str | None = None, cwd: str | None = None, client_gone: Callable[[], bool] = never_gone) -> Outcome:
        """Submit `bash -c cmd`; wait inline up to the capped window; see the module doc for todos.
        `client_gone()` says whether the caller hung up during the wait (then the result becomes a todo)."""
        cmd, timeout_secs, cwd_path, window = self._check_run_args(cmd, timeout_secs, wait_seconds, cwd)
        nonce, candidate = f"{self._ids.getrandbits(64):016x}", f"{self._ids.getrandbits(32):08x}"
        with self._cond:
            if self._closing:
                raise EngineError("the daemon is shutting down: no new tasks")
            task_id = self._claim_id(name, candidate)
            self._seq += 1
            task = Task(id=task_id, cmd=cmd, cwd=cwd_path, marker=f"{task_id}:{nonce}",
                        seq=self._seq, submitted_at=time.time(), timeout_secs=timeout_secs)
            self._reserved[task_id] = task  # the id is taken; no worker can see the task yet
        outputs: tuple[int, int] | None = None
        try:
            # Files and the pending record are written outside the lock (status/kill/list never wait on this
            # fsync) but before the task is queued, so no later record of it can be overtaken by this one.
            # Owning the id first waits for a write of a finished task of that name still in progress.
            self.records.own(task_id, task)
            outputs = self.store.prepare(task_id)
            self.records.save_now(task_id, task, record_of(task))
        except BaseException as exc:
            for fd in outputs or ():
                os.close(fd)
            self.records.own(task_id, None)
            with self._cond:
                del self._reserved[task_id]
            if isinstance(exc, OSError):
                raise EngineError(f"cmd: cannot create the task's files in {self.store.dir}: {exc.strerror or exc}") from None
            raise
        with self._cond:
            del self._reserved[task_id]
            self._tasks[task_id] = task
            self._queue.append(task_id)
            if window.seconds > 0:
                self._inline_waiters[task_id] += 1  # before any worker can end it: see _after_end
            if self._closing:  # shutdown began while the record was written
                self._queue.remove(task_id)
                self._end_without_process(task, T.INTERRUPTED, "interrupted: the daemon shut down before it started")
            starting = self._start_queued()
            if window.seconds <= 0:
                self._upsert_running(task)
        self._hand_outputs(task, outputs, starting)
        self._start_runners(starting)
        if window.seconds <= 0:
            return Outcome(self._view(task_id), window, 0.0)
        return self._wait(task, window, registered=True, from_run=True, client_gone=client_gone)

    def _check_run_args(self, cmd: Any, timeout_secs: Any, wait_seconds: Any, cwd: Any):
        if not isinstance(cmd, str) or not cmd.strip():
            raise EngineError("cmd: is required and must be a non-empty shell command")
        if len(cmd.encode("utf-8", "surrogatepass")) > MAX_CMD_BYTES:
            raise EngineError(f"cmd: must be at most {MAX_CMD_BYTES} bytes (write long scripts to a file and run that)")
        if "\x00" in cmd:
            raise EngineError("cmd: must not contain NUL characters")
        if timeout_secs is not None:
            if isinstance(timeout_secs, bool) or not isinstance(timeout_secs, (int, float)) or not timeout_secs > 0:
                raise EngineError("timeout_secs: must be a positive number of seconds")
            if timeout_secs > 10**9:
                raise EngineError("timeout_secs: must be at most 1000000000")
            timeout_secs = float(timeout_secs)
        if wait_seconds is not None and (isinstance(wait_seconds, bool) or not isinstance(wait_seconds, (int, float))
                                         or not wait_seconds >= 0):
            raise EngineError("wait_seconds: must be a number >= 0")
        if cwd is None:
            cwd_path = self.default_cwd
        else:
            if not isinstance(cwd, str) or not cwd or "\x00" in cwd:
                raise EngineError("cwd: must be a path to an existing directory")
            cwd_path = os.path.abspath(cwd)
            if not os.path.isdir(cwd_path):
                raise EngineError(f"cwd: {cwd!r} is not an existing directory")
        return cmd, timeout_secs, cwd_path, cap_wait(wait_seconds, cap=self.wait_cap)

    def _claim_id(self, name: str | None, candidate: str) -> str:
        """A fresh hex id (`candidate` unless taken), or `name` if valid and free (a finished task of that
        name is replaced)."""
        if name is None:
            task_id = candidate
            while task_id in self._tasks or task_id in self._reserved:
                task_id = f"{self._ids.getrandbits(32):08x}"
            return task_id
        try:
            check_name(name, "name")
        except InvalidName as exc:
            raise EngineError(str(exc)) from None
        old = self._tasks.get(name) or self._reserved.get(name)
        if old is not None:
            if not old.terminal:
                raise EngineError(f"name: task {name!r} is still {old.state}; wait for it, kill it, or choose another name")
            self._forget(name)
        return name

    def _forget(self, task_id: str) -> None:
        """Drop a finished task from memory (its files are replaced or deleted by the caller)."""
        self._tasks.pop(task_id, None)
        self._leftovers.pop(task_id, None)
        self._seen.discard(task_id)
        if task_id in self._todo_open:
            self._todo_open.discard(task_id)
            self._todo_ops.append(("clear", (task_id,)))

    # ----- the queue and the workers' hooks -------------------------------------------------------------

    def _start_queued(self) -> list[TaskRunner]:
        """Take queued tasks, in submission order, while fewer than max_running are started or running (the
        caller holds the lock); the caller starts the returned runners after releasing it (`_start_runners`):
        a thread's start waits for the new thread to run, and under load that held every caller of the lock."""
        runners = []
        while self._queue and len(self._starting_or_running) < self.settings.max_running and not self._closing:
            task = self._tasks[self._queue.popleft()]
            runner = TaskRunner(task, self.store, self.reaper, self, self.settings.kill_grace, self.subreaper,
                                self.launcher, self.workers)
            self._runners[task.id] = runner
            self._starting_or_running.add(task.id)
            runners.append(runner)
        return runners

    @staticmethod
    def _hand_outputs(task: Task, outputs: tuple[int, int], starting: list[TaskRunner]) -> None:
        """The output files `run` just created go to the task's worker if it starts now (it would open them
        again), else they are closed (a queued task's worker opens them when it starts)."""
        mine = next((r for r in starting if r.task is task), None)
        if mine is not None:
            mine.outputs = outputs
        else:
            for fd in outputs:
                os.close(fd)

    @staticmethod
    def _start_runners(runners: list[TaskRunner]) -> None:
        for runner in runners:
            runner.start()

    def on_spawned(self, task: Task, pid: int, started_mono: float) -> None:
        with self._cond:
            task.pid = pid
            task.started_mono, task.started_at = started_mono, time.time()
            T.transition(task, T.RUNNING)  # no notify: waits are for ended tasks, this would wake them for nothing
            if task.kill_signal:  # killed while it was being started
                self._killpg(task, task.kill_signal)

    def on_still_running(self, task: Task) -> None:
        """The running record, written once the task has run for runner.RUNNING_RECORD_DELAY (see there)."""
        with self._cond:
            if task.state != T.RUNNING:
                return
            record = record_of(task)
        self._persist(task, record)

    def _persist(self, task: Task, record: dict) -> None:
        """Write a record now, in order with the task's other records; a failing disk must not stop the
        task's life cycle (it is logged, and the state stays right in memory)."""
        try:
            self.records.save_now(task.id, task, record)
        except OSError as exc:
            log.error("cannot write the record of task %s: %s", task.id, exc)

    def on_spawn_failed(self, task: Task, error: str) -> None:
        with self._cond:
            if task.state == T.PENDING:
                T.transition(task, T.RUNNING)
            if task.state == T.RUNNING:
                T.transition(task, T.DONE, TaskResult(ended_at=time.time(), duration=0.0, exit_code=127,
                                                      note=f"failed to start: {error}"))
            self._recording[task.id] = task
            record = record_of(task)
        self._persist(task, record)
        self._after_end(task)

    def on_deadline(self, task: Task) -> bool:
        with self._cond:
            if task.kill_signal == "SIGKILL":
                return False
            task.timed_out = True
            return True

    def on_leader_exited(self, task: Task) -> None:
        with self._cond:
            self._leader_exited.add(task.id)  # from now on the group id is not signalled by kill()

    def on_ended(self, task: Task, status: int, rusage: Rusage, duration: float, leftovers: list[ProcInfo]) -> None:
        code, signalled = T.exit_status(status)
        with self._cond:
            if self._closing:
                state, note = T.INTERRUPTED, "interrupted: the daemon shut down"
            else:
                state, note = T.end_state(task, signalled)
            T.transition(task, state, TaskResult(ended_at=time.time(), duration=duration, exit_code=code,
                                                 signal=signalled, rusage=rusage, note=note))
            if leftovers:
                self._leftovers[task.id] = leftovers
            self._recording[task.id] = task
            record = record_of(task)
        self._persist(task, record)
        self._after_end(task)

    def on_leftovers(self, task: Task, procs: list[ProcInfo]) -> None:
        """Processes of a naturally ended task still alive after its shell exited (reported by status)."""
        with self._cond:
            if self._tasks.get(task.id) is task:
                self._leftovers[task.id] = procs
        self._wake.ring()  # they are known now: reap them when they die

    def _after_end(self, task: Task) -> None:
        """Wake the waiters, send the completion todo unless a waiter delivers the result, start the next."""
        with self._cond:
            if self._recording.get(task.id) is task:
                del self._recording[task.id]
            runner = self._runners.get(task.id)
            if runner is None or runner.task is task:  # else its name was reused: the id is the new task's
                self._starting_or_running.discard(task.id)
                self._leader_exited.discard(task.id)
                self._runners.pop(task.id, None)
            self._cond.notify_all()
            if not self._inline_waiters[task.id]:
                self._upsert_completion(task)
            starting = self._start_queued()
            prune = len(self._tasks) - len(self._queue) - len(self._starting_or_running) > self.settings.keep_tasks
        self._start_runners(starting)
        self._flush_todos()
        if prune or self.reaper.knows_any:  # otherwise the housekeeper would wake to find nothing to do
            self._wake.ring()

    def _end_without_process(self, task: Task, state: str, note: str) -> None:
        """pending -> killed/interrupted (under the lock): no process ever ran."""
        T.transition(task, state, TaskResult(ended_at=time.time(), duration=None, note=note))
        self._persist(task, record_of(task))
        self._cond.notify_all()
        if not self._inline_waiters[task.id]:
            self._upsert_completion(task)

    def _flush_todos(self) -> None:
        """Deliver queued todo calls in decision order, outside the engine's lock, one drainer at a time.

        A caller that finds another drainer at work leaves at once: that drainer takes its ops too (they are
        queued before this is called). Waiting for the lock here had every tool call queue behind the other
        calls' outbox writes (scripts/bench: 8 clients stalled at ~70 tasks/s on this lock)."""
        if not self._todo_ops:  # a hint read without the lock: whoever queues an op flushes after it
            return
        while True:
            if not self._todo_lock.acquire(blocking=False):
                return
            try:
                while True:
                    with self._cond:  # every op queued so far, in one visit to the lock
                        ops, self._todo_ops = self._todo_ops, collections.deque()
                    if not ops:
                        break
                    for op, args in ops:
                        try:
                            getattr(self.todos, op)(*args)
                        except Exception:  # a todo must never break a tool call or a worker
                            log.exception("todo %s failed", op)
            finally:
                self._todo_lock.release()
            with self._cond:  # an op queued after our last look, whose producer saw the lock still held
                if not self._todo_ops:
                    return

    # ----- todos ------------------------------------------------------------------------------------------

    def _upsert_running(self, task: Task) -> None:
        if task.terminal or task.id in self._todo_open:
            return
        what = "queued" if task.id in self._queue else "running"
        out, err = self.store.path(task.id, "out"), self.store.path(task.id, "err")
        body = (f"bash task {task.id} is {what}: {shorten(task.cmd, 200)}\n"
                f"Output so far: Read({out}) and Read({err}). Check it with status(id=\"{task.id}\"); "
                "its completion will replace this todo.")
        self._todo_open.add(task.id)
        self._todo_ops.append(("upsert", (task.id, f"bash {task.id} {what}: {shorten(task.cmd, 60)}", body,
                                           {"id": task.id, "status": task.state})))

    def _upsert_completion(self, task: Task) -> None:
        if task.id in self._seen:
            return
        r = task.result
        facts = [f"status={task.state}"]
        if r and r.exit_code is not None:
            facts.append(f"exit_code={r.exit_code}")
        if r and r.signal:
            facts.append(f"signal={r.signal}")
        if r and r.duration is not None:
            facts.append(f"duration={r.duration:.2f}s")
        out, err = self.store.path(task.id, "out"), self.store.path(task.id, "err")
        body = (f"bash task {task.id} finished: {' '.join(facts)}\n"
                f"command: {shorten(task.cmd, 200)}\n" + (f"note: {r.note}\n" if r and r.note else "") +
                f"stdout: Read({out})\nstderr: Read({err})\n"
                f"status(id=\"{task.id}\") shows the tails and clears this todo.")
        self._todo_open.add(task.id)
        self._todo_ops.append(("upsert", (task.id, f"bash {task.id} {' '.join(facts)}: {shorten(task.cmd, 60)}", body,
                                           self._view_locked(task.id).to_dict())))

    def _hand_over(self, task: Task, client_gone: Callable[[], bool]) -> None:
        """A terminal result is about to be answered (lock held): the answer delivers it, unless the caller
        hung up, in which case the completion todo carries it."""
        if client_gone():
            self._upsert_completion(task)
        else:
            self._observed_terminal(task)

    def _observed_terminal(self, task: Task) -> None:
        """The caller is about to hand a terminal result to the agent: no todo for it, and clear an open one."""
        self._seen.add(task.id)
        if task.id in self._todo_open:
            self._todo_open.discard(task.id)
            self._todo_ops.append(("clear", (task.id,)))

    # ----- status, waits ------------------------------------------------------------------------------------

    def status(self, task_id: str, wait_seconds: float | None = None, client_gone: Callable[[], bool] = never_gone) -> Outcome:
        if wait_seconds is not None and (isinstance(wait_seconds, bool) or not isinstance(wait_seconds, (int, float))
                                         or not wait_seconds >= 0):
            raise EngineError("wait_seconds: must be a number >= 0")
        window = cap_wait(wait_seconds, default=0.0, cap=self.wait_cap)
        with self._cond:
            task = self._get(task_id)
            if window.seconds > 0 and not self._ended_and_recorded(task):
                self._inline_waiters[task.id] += 1
                registered = True
            else:
                registered = False
        if registered:
            return self._wait(task, window, registered=True, from_run=False, client_gone=client_gone)
        with self._cond:
            if task.terminal:
                self._hand_over(task, client_gone)
        return Outcome(self._view(task.id), window, 0.0)

    def _wait(self, task: Task, window: WaitWindow, registered: bool, from_run: bool,
              client_gone: Callable[[], bool] = never_gone) -> Outcome:
        """Inline wait (the caller registered as a waiter under the lock). No free slot: answer at once.

        A caller that hung up while waiting will never read the result: it is left as the completion todo
        instead of counting as seen (robustness test: a hang-up during an inline wait lost the completion)."""
        skipped = not self.slots.try_acquire()
        start = self.clock()
        try:
            with self._cond:
                if not skipped:
                    wait_for(self._cond, lambda: self._ended_and_recorded(task), window.seconds, self.clock)
                self._inline_waiters[task.id] -= 1
                if not self._inline_waiters[task.id]:
                    del self._inline_waiters[task.id]
                if task.terminal:
                    self._hand_over(task, client_gone)
                elif from_run:
                    self._upsert_running(task)
                waited = self.clock() - start
        finally:
            if not skipped:
                self.slots.release()
        return Outcome(self._view(task.id), window, waited, wait_skipped=skipped)

    def _ended_and_recorded(self, task: Task) -> bool:
        return task.terminal and self._recording.get(task.id) is not task

    def _get(self, task_id: Any) -> Task:
        if not isinstance(task_id, str):
            raise EngineError("id: must be a string")
        try:
            check_name(task_id, "id")
        except InvalidName as exc:
            raise EngineError(str(exc)) from None
        task = self._tasks.get(task_id)
        if task is None:
            raise UnknownTask(f"id: no task {task_id!r} (list() shows the known tasks)")
        return task

    def _view_locked(self, task_id: str) -> TaskView:
        task = self._tasks.get(task_id)
        if task is None:  # pruned or replaced while the caller waited
            raise UnknownTask(f"id: no task {task_id!r} any more (retention pruned it)")
        snap = copy.copy(task)  # every field is a flat value or a result that is never changed once attached
        if task.state == T.RUNNING and task.started_mono is not None:
            duration = self.clock() - task.started_mono
        else:
            duration = task.result.duration if task.result else None
        position = None
        if task.state == T.PENDING:
            position = self._queue.index(task_id) + 1 if task_id in self._queue else 0
        return TaskView(snap, duration, position)

    def _view(self, task_id: str) -> TaskView:
        """Snapshot under the lock; tails and leftover checks outside it (file and /proc reads)."""
        self._flush_todos()
        with self._cond:
            view = self._view_locked(task_id)
            leftovers = list(self._leftovers.get(task_id, ()))
        limit = self.settings.tail_bytes
        if view.task.state == T.PENDING:
            # Nothing has written to a pending task's files (prepare made them empty; no process yet): no
            # reads. A run(wait_seconds=0) answers from here, and under load each file syscall of a request
            # thread waits for the GIL again when it returns (scripts/bench.py, 8 clients).
            view.stdout, view.stderr = self.store.empty_tail(task_id, "out"), self.store.empty_tail(task_id, "err")
        else:
            view.stdout = self.store.tail(task_id, "out", limit)
            view.stderr = self.store.tail(task_id, "err", limit)
        if leftovers:
            alive = [p for p in leftovers if is_alive(p)]
            view.leftovers = [p.pid for p in alive]
            if len(alive) != len(leftovers):
                with self._cond:
                    if alive:
                        self._leftovers[task_id] = alive
                    else:
                        self._leftovers.pop(task_id, None)
        return view

    # ----- kill -----------------------------------------------------------------------------------------------

    def kill(self, task_id: str, force: bool = False) -> KillOutcome:
        """Fire-and-forget: cancel a pending task, signal a running one's group, or stop a finished
        task's leftover processes. Never waits for the task to end."""
        sig = "SIGKILL" if force else "SIGINT"
        with self._cond:
            task = self._get(task_id)
            if task.state == T.PENDING and task.id in self._queue:
                self._queue.remove(task.id)
                self._end_without_process(task, T.KILLED, "killed by request before it started")
                action, message = "cancelled", f"task {task.id} was pending: cancelled before it started"
            elif not task.terminal and (task.id not in self._leader_exited or task.kill_signal or task.timed_out):
                # Running, or its worker is stopping what the leader left (a force kill escalates that at once).
                self._signal_locked(task, sig)
                action = "signalled"
                if task.id in self._leader_exited:
                    message = f"task {task.id} is ending; {sig} goes to the processes it left behind"
                else:
                    message = (f"sent {sig} to the process group of task {task.id}; the result will surface as a "
                               "todo (or check with status)")
                if not force:
                    message += "; if it does not exit, call kill again with force=true"
            else:
                leftovers = self._leftover_candidates(task)
                if leftovers:
                    threading.Thread(target=self._stop_leftovers, args=(task.id, force), daemon=True).start()
                    action = "leftovers"
                    message = (f"task {task.id} has already ended ({task.state}); stopping its leftover processes "
                               f"(pids {' '.join(str(p.pid) for p in leftovers)})")
                else:
                    action, message = "nothing", f"task {task.id} has already ended ({task.state}); nothing to stop"
        return KillOutcome(self._view(task.id), action, message)

    def _signal_locked(self, task: Task, sig: str) -> None:
        """Record the kill and signal the group (recorded pgid) while its leader is unreaped; wake the worker."""
        if task.kill_signal != "SIGKILL":
            task.kill_signal = sig
        runner = self._runners.get(task.id)
        if task.state == T.RUNNING and task.id not in self._leader_exited:
            self._killpg(task, sig)
        if runner is not None:
            runner.poke()

    @staticmethod
    def _killpg(task: Task, sig: str) -> None:
        try:
            os.killpg(task.pgid, getattr(signal, sig))
        except ProcessLookupError:
            pass

    def _leftover_candidates(self, task: Task) -> list[ProcInfo]:
        if task.state == T.RUNNING:  # leader exited, the worker is sweeping: it handles the group
            return [ProcInfo(task.pid or 0, 0.0, task.marker)]
        return [p for p in self._leftovers.get(task.id, ()) if is_alive(p)]

    def _stop_leftovers(self, task_id: str, force: bool) -> None:
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None:
                return
            marker = task.marker
        procs = find_processes({marker: None}, self.subreaper, leaders=self.reaper.leaders())[marker]
        self.reaper.remember(procs)
        stop_processes(procs, force=force, deadline=time.monotonic() + self.settings.kill_grace)
        self._wake.ring()

    # ----- list -----------------------------------------------------------------------------------------------

    def list(self, state: str | None = None, limit: int | None = None) -> tuple[list[TaskView], int]:
        """Tasks newest first, optionally of one state; returns (views without tails, total matching)."""
        if state is not None and state not in T.STATES:
            raise EngineError(f"state: must be one of {', '.join(T.STATE_ORDER)}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise EngineError("limit: must be an integer >= 1")
        with self._cond:
            ids = [t.id for t in sorted(self._tasks.values(), key=lambda t: t.seq, reverse=True)
                   if state is None or t.state == state]
            total = len(ids)
            return [self._view_locked(i) for i in ids[: limit or len(ids)]], total

    # ----- housekeeping: retention and orphan reaping -------------------------------------------------------

    def _our_markers(self) -> set[str]:
        with self._cond:
            return {t.marker for t in self._tasks.values()}

    def _housekeeping(self) -> None:
        """Retention and orphan reaping, woken at task ends (when there is something to do) and by the death of
        a known orphan (its pidfd); a full pass (age-based retention, learning re-parented orphans) at least
        every HOUSEKEEPING_INTERVAL."""
        last_full = time.monotonic()
        while not self._closing:
            self._wake.wait(HOUSEKEEPING_INTERVAL, also=self.reaper.watched())
            full = time.monotonic() - last_full >= HOUSEKEEPING_INTERVAL
            try:
                if self.subreaper and (full or self.reaper.has_known()):
                    self.reaper.reap(self._our_markers)
                self._prune(by_age=full)
            except Exception:
                log.exception("housekeeping failed")
            if full:
                last_full = time.monotonic()

    def _prune(self, by_age: bool = True) -> None:
        """Retention: finished tasks beyond keep_tasks, or older than keep_days, go oldest first, files too.
        Without `by_age` (after each task end) only the count is checked, and cheaply."""
        keep, max_age = self.settings.keep_tasks, self.settings.keep_days * 86400.0
        now = time.time()
        with self._cond:
            if not by_age and len(self._tasks) - len(self._queue) - len(self._starting_or_running) <= keep:
                return
            finished = sorted((t for t in self._tasks.values() if t.terminal),
                              key=lambda t: (t.result.ended_at if t.result else t.submitted_at, t.seq))
            excess = max(0, len(finished) - keep)
            doomed = [t for i, t in enumerate(finished)
                      if i < excess or now - (t.result.ended_at if t.result else t.submitted_at) > max_age]
            for t in doomed:
                self._forget(t.id)
        self._flush_todos()
        for t in doomed:
            # Unless its name was taken again meanwhile (then the files are the new task's).
            self.records.release(t.id, t, self.store.delete)
        if doomed:
            log.info("retention pruned %d finished task(s)", len(doomed))

    @property
    def closing(self) -> bool:
        """True once shutdown began (workers then leave the sweep of leftovers to shutdown's single sweep)."""
        return self._closing

    # ----- for tests and the daemon ---------------------------------------------------------------------------

    def task_ids(self) -> list[str]:
        with self._cond:
            return list(self._tasks)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no task is pending or running (tests, shutdown paths)."""
        with self._cond:
            return wait_for(self._cond, lambda: not self._recording and all(t.terminal for t in self._tasks.values()),
                            timeout)

    @property
    def state_dir(self) -> Path:
        return self.store.state_dir
