"""A worker per task (on a pooled thread, workers.py): wait, time out, signal the group, find escapees, reap
(the spawn happens in the thread that starts the task, see TaskRunner.start). Every process operation goes
through a processes.ops.TaskProcessOps.

Facts this module is built on (docs/design.md, "Linux processes"):
- `preexec_fn` is unsafe in a threaded process: the new session comes from `start_new_session=True`.
- Non-interactive bash makes `&` children ignore SIGINT, so after a graceful kill the group leader may be gone
  while its children live on: once the leader has exited, whatever is left of the task is stopped too
  (SIGTERM, then SIGKILL after the grace).
- A group id stays reserved while its leader is an unreaped zombie: the exit is observed without reaping
  (its pidfd turns readable), the group is swept, and only then is the leader reaped with `wait4` (for its
  rusage). The group id recorded at spawn is used for every signal; never `os.getpgid`.
- Which processes are the task's, and how they are stopped: hivebash/processes/search.py; the orphans the daemon
  inherits as a subreaper: hivebash/processes/reaper.py.
"""

from __future__ import annotations

import functools
import logging
import os
import resource
import select
import shutil
import signal
import threading
import time
from typing import Protocol

from common.process_seam import Leader, ProcInfo, drain_eventfd
from hivebash.disk.store import TaskStore
from hivebash.processes.ops import TaskProcessOps
from hivebash.processes.reaper import OrphanReaper
from hivebash.processes.search import MARKER_ENV
from hivebash.processes.task_processes import TaskProcesses
from hivebash.processes.workers import WorkerPool
from hivebash.stdin.task_input import NULL, Stdio, TaskInput
from hivebash.tasks.task import Rusage, Task

log = logging.getLogger(__name__)

# A task still running this long after its spawn gets its `running` record written (by its worker, which
# is idle then); one that ends sooner goes from its pending record straight to its terminal one. Most agent
# commands are short: writing a record for a state the disk would hold for a millisecond would cost every such
# task one file creation, fsync and rename more, and, racing the worker's write, delay the inline answer
# (docs/performance.md, "Measurements behind the code").
# What a crash in this window leaves is the pending record, whose marker is all a restart needs to find and
# stop the task's processes (and Engine.open then says the task was running when it finds them).
RUNNING_RECORD_DELAY = 0.05

# The longest single wait of a worker, in ms. poll() takes a C int of milliseconds: a timeout_secs above
# 2,147,483 s overflowed it and killed the worker. Longer deadlines are reached by waiting again.
MAX_POLL_MS = 3_600_000


class RunnerHooks(Protocol):
    """What the engine does at each step of a task's life (lifecycle.Lifecycle: the registry's transitions,
    and the records)."""

    @property
    def closing(self) -> bool:
        """Shutdown began: the worker leaves the sweep of leftovers to shutdown's single sweep."""

    def on_spawned(self, task: Task, pid: int, started_mono: float) -> None: ...

    def on_still_running(self, task: Task) -> None: ...

    def on_spawn_failed(self, task: Task, error: str) -> None: ...

    def on_deadline(self, task: Task, kill_at: float) -> bool:
        """The timeout passed: True if the task is now stopping (SIGTERM, SIGKILL at `kill_at`)."""

    def on_leader_exited(self, task: Task, exited_at: float) -> bool:
        """The leader exited (unreaped): True if a stop was asked (the worker sweeps what it left)."""

    def on_ended(self, task: Task, status: int, rusage: Rusage, duration: float, leftovers: list[ProcInfo],
                 failure: str | None = None, output_lost: bool = False) -> None:
        """`output_lost`: the daemon itself could not write all of a terminal's output to the task's file."""



class Launcher:
    """What every spawn shares, prepared once: the base environment, /dev/null, and bash resolved per PATH.

    Each of these would be a cost on every task's path: copying os.environ, encoding it (Popen turns every
    name and value to bytes, a call each, unless they are bytes already), opening and closing /dev/null, and
    Popen's search of PATH for `bash` (about eight failed execve in the child). Under load every syscall of the
    daemon hands the GIL to another thread and waits to get it back (docs/performance.md, "Measurements behind
    the code"). The environment is the daemon's as it was when the engine started (`env` None), or `env`.
    """

    def __init__(self, env: dict[str, str] | None = None):
        base = dict(os.environ if env is None else env)
        base.pop(MARKER_ENV, None)
        self.base_env = {os.fsencode(k): os.fsencode(v) for k, v in base.items()}
        self.devnull = _devnull()
        # Popen searches the *child's* PATH for a bare name: resolve it the same way, once.
        self.bash = shutil.which("bash", path=base.get("PATH", os.defpath)) or "bash"

    def environment(self, marker: str) -> dict[bytes, bytes]:
        env = dict(self.base_env)
        env[_MARKER_KEY] = marker.encode()
        return env


_MARKER_KEY = os.fsencode(MARKER_ENV)


def _held_lock() -> threading.Lock:
    """A lock already held: a C lock the worker releases at its end, where a threading.Event would be a
    Condition and a Lock built in Python for every task."""
    lock = threading.Lock()
    lock.acquire()
    return lock


@functools.cache
def _devnull() -> int:
    """/dev/null for every task's stdin, opened once per process and never closed: closing it while a spawn
    could still use its number would hand a recycled descriptor to a child as its stdin."""
    return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)


class TaskRunner:
    """Runs one task from spawn to reaped: spawned by `start`, then supervised in a worker thread of its own.
    The engine asks for kills by setting `task.kill_signal`, signalling the group itself, and calling `poke()`
    so the worker re-evaluates."""

    def __init__(self, task: Task, store: TaskStore, reaper: OrphanReaper, hooks: RunnerHooks,
                 kill_grace: float, subreaper: bool, launcher: Launcher, pool: WorkerPool, ops: TaskProcessOps):
        self.task = task
        self.ops = ops
        self.procs = TaskProcesses(task, self.ops, reaper, subreaper, kill_grace)
        self.store = store
        self.reaper = reaper
        self.hooks = hooks
        self.kill_grace = kill_grace
        self.subreaper = subreaper
        self.launcher = launcher
        self.outputs: tuple[int, int] | None = None  # the output files, if the caller has them open (closed at spawn)
        # An eventfd the engine writes to (kill asked) and the worker polls beside the leader's pidfd: the pooled
        # thread's own (workers.WorkerPool), known once the worker runs. A poke before then is kept in `_poked`.
        self._wake: int | None = None
        self._poked = False  # a kill asked for before the worker ran
        self._rung = False  # the eventfd was written to: the worker leaves it drained for the thread's next task
        self._wake_lock = threading.Lock()
        self.pool = pool
        self._running = _held_lock()  # released once the worker has finished (join)
        self._proc: Leader | None = None  # spawned by `start`, supervised by the worker
        self._failure: str | None = None  # why `start` could not spawn it
        self._broken: str | None = None  # why the task, spawned, cannot be supervised (it is stopped)
        self._started = 0.0  # monotonic time of the spawn
        self._ended = False  # the hooks were told how the task ended: a later failure must not end it again
        self.input: TaskInput | None = None  # what `send` writes to (a pipe or tty task), set before on_spawned

    def start(self) -> None:
        """Called once, by whoever took the task from the queue, after it released the engine's lock: the
        process is spawned here, in the caller's thread, then a pooled worker supervises it to the end. The
        worker's wake-up thus overlaps the process's own start instead of delaying it: on a busy machine a
        woken thread waits for a core, on every run()'s path (docs/performance.md, "Measurements behind the code")."""
        try:
            if (proc := self._spawn()) is not None:
                self.hooks.on_spawned(self.task, proc.pid, self._started)
        except Exception as exc:  # reported by the worker, like every other failure to start
            log.exception("starting task %s failed", self.task.id)
            if self._proc is None:
                self._failure = "internal error while starting the task (see the daemon log)"
            else:  # it runs: the worker stops it
                self._broken = _worker_failed(exc)
        self.pool.submit(self._main)

    def join(self, timeout: float) -> bool:
        """Wait until the worker has finished (a runner not started yet is waited for too); True if it has."""
        done = self._running.acquire(timeout=timeout)
        if done:
            self._running.release()  # for any other joiner
        return done

    def poke(self) -> None:
        """Wake the worker (a kill was asked); never blocks."""
        with self._wake_lock:
            if self._wake is not None:
                os.eventfd_write(self._wake, 1)
                self._rung = True
            else:
                self._poked = True

    def _main(self, wake: int) -> None:
        thread = threading.current_thread()
        pooled_name, thread.name = thread.name, f"task-{self.task.id}"  # for the log and py-spy
        with self._wake_lock:
            self._wake = wake
            if self._poked:
                os.eventfd_write(wake, 1)
                self._rung = True
        proc, self._proc = self._proc, None
        try:
            if self._failure is not None:
                self.hooks.on_spawn_failed(self.task, self._failure)
            elif proc is not None:
                self._supervise_or_stop(proc, wake)
        except Exception:  # a worker must never die silently: the task would stay "running" forever
            log.exception("worker of task %s failed", self.task.id)
            if proc is None:
                self.hooks.on_spawn_failed(self.task, "internal error in the worker (see the daemon log)")
        finally:
            with self._wake_lock:
                self._wake = None
                if self._rung:  # (a read of an empty eventfd is one more syscall on every task's path)
                    drain_eventfd(wake)  # the thread's next task starts with it empty
            for fd in self.outputs or ():  # handed over but never spawned (an internal error before it)
                os.close(fd)
            self.outputs = None
            thread.name = pooled_name
            self._running.release()

    def _supervise_or_stop(self, proc: Leader, wake: int) -> None:
        """Supervise the task to its end; if the worker fails once the process runs, stop the task instead."""
        reason = self._broken
        if reason is None:
            try:
                self._supervise(proc, wake)
                return
            except Exception as exc:
                log.exception("worker of task %s failed while supervising pid %d", self.task.id, proc.pid)
                reason = _worker_failed(exc)
        if not self._ended:
            self._stop_after_failure(proc, reason)

    def _stop_after_failure(self, proc: Leader, reason: str) -> None:
        """The task's process runs but its worker cannot supervise it: stop every process of the task, reap
        the leader and record the end as `killed`, saying why (never "failed to start": it did start)."""
        task = self.task
        try:
            self.ops.signal_group(proc.pid, signal.SIGKILL)  # its own group; the unreaped leader holds the id
        except OSError:
            pass
        try:
            self.procs.signal(signal.SIGKILL)  # the escapees too, when the process table can be read
        except Exception:
            log.exception("task %s: cannot look for its escaped processes", task.id)
        status, rusage = int(signal.SIGKILL), Rusage(0.0, 0.0, 0, max_rss_exact=False)
        if proc.returncode is None:
            try:
                status, usage = self.ops.reap(proc)
                rusage = Rusage(usage.ru_utime, usage.ru_stime, usage.ru_maxrss * 1024, max_rss_exact=False)
            except ChildProcessError:
                pass
        self.reaper.drop_leader(proc.pid)
        self._end_input()
        self._ended = True
        self.hooks.on_ended(task, status, rusage, time.monotonic() - (task.started_mono or self._started), [],
                            failure=reason)

    def _spawn(self) -> Leader | None:
        """The task's process, or None with `_failure` saying why (the worker reports it: reporting here
        would start the next queued task from inside this one's start)."""
        task, launcher = self.task, self.launcher
        env = launcher.environment(task.marker)
        try:
            out, err = self.outputs or self.store.open_outputs(task.id)
            self.outputs = None
        except OSError as exc:
            self._failure = f"cannot open the output files: {exc}"
            return None
        stdio = None
        try:
            stdin, stdout, stderr = launcher.devnull, out, err
            if task.stdin != NULL:  # a pipe or a terminal (task_input.py); /dev/null costs nothing more
                stdio = Stdio(task.stdin, launcher.devnull, out, err)
                stdin, stdout, stderr, env = stdio.stdin, stdio.stdout, stdio.stderr, stdio.environment(env)
            self.reaper.begin_spawn()
            proc = None
            try:
                proc = self._proc = self.ops.spawn(["bash", "-c", task.cmd], executable=launcher.bash,
                                                   stdin=stdin, stdout=stdout, stderr=stderr, cwd=task.cwd, env=env)
            finally:
                self.reaper.end_spawn(proc.pid if proc is not None else None, task.marker)
            self._started = time.monotonic()
        except OSError as exc:
            if stdio is not None:
                stdio.failed()
            self._failure = f"cannot start bash: {exc}"
            return None
        finally:
            os.close(out)
            os.close(err)
        if stdio is not None:  # (a failure here is the worker's: it stops the task, see `start`)
            self.input = stdio.input
            stdio.spawned(task.id)
        # The leader stays our unreaped child until `_supervise` has swept its group, so its pid names it:
        # no start time is read (it would cost a psutil read of /proc/<pid>/stat and /proc/stat on every task).
        return proc

    def _supervise(self, proc: Leader, wake: int) -> None:
        task, pid = self.task, proc.pid
        pidfd = self.ops.exit_fd(proc)
        try:
            exited_at = self._wait_leader(pidfd, wake)
        finally:
            os.close(pidfd)
        # A readable pidfd means the leader has exited; it stays an unreaped zombie (its group id ours) until
        # the wait4 below, after the sweep.
        stopping = self.hooks.on_leader_exited(task, exited_at)
        leftovers = self.procs.sweep(exited_at, wake, self.hooks.closing) if stopping else []
        status, usage = self.ops.reap(proc)
        self.reaper.drop_leader(pid)
        peak = usage.ru_maxrss * 1024
        rusage = Rusage(usage.ru_utime, usage.ru_stime, peak, max_rss_exact=_above_daemon_peak(peak))
        if not stopping:
            leftovers = self._survivors(exited_at)
        self._end_input()
        self._ended = True
        lost = self.input is not None and self.input.lost_output
        self.hooks.on_ended(task, status, rusage, exited_at - (task.started_mono or exited_at), leftovers,
                            output_lost=lost)

    def _end_input(self) -> None:
        """The input is closed when the task ends, before its end is recorded (a tty's last output is in its
        file by then)."""
        if self.input is not None:
            try:
                self.input.close()
            except OSError:
                log.exception("task %s: closing its input failed", self.task.id)

    def _survivors(self, exited_at: float) -> list[ProcInfo]:
        """After a natural exit: the task's processes that outlived its shell (background `&` jobs, setsid
        daemons). Searched before the end is recorded, so the answer and the todo that report the end name
        them; they are only reported (kill stops them). As a subreaper with no orphan at all there is nothing
        to search: anything of the task that outlived its shell would have been re-parented to us."""
        if self.hooks.closing or (self.subreaper and self.ops.orphans(exited_at) == []):
            return []
        found = self.procs.find(group=False, fresh_after=exited_at)
        if found:
            self.reaper.remember(found)
        return found

    def _wait_leader(self, pidfd: int, wake: int) -> float:
        """Wait for the leader's exit, handling the deadline and kill requests; return the monotonic exit time."""
        task = self.task
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.register(wake, select.POLLIN)
        deadline = (task.started_mono or time.monotonic()) + task.timeout_secs if task.timeout_secs else None
        hard_deadline: float | None = None  # when SIGKILL follows the SIGTERM of a timeout
        record_at: float | None = (task.started_mono or time.monotonic()) + RUNNING_RECORD_DELAY
        while True:
            now = time.monotonic()
            target = hard_deadline if hard_deadline is not None else deadline
            if record_at is not None:
                target = record_at if target is None else min(target, record_at)
            timeout_ms = MAX_POLL_MS if target is None else min(MAX_POLL_MS, max(0.0, (target - now) * 1000))
            events = dict(poller.poll(timeout_ms))
            if pidfd in events:
                return time.monotonic()
            if wake in events:
                drain_eventfd(wake)
                continue
            now = time.monotonic()
            if record_at is not None and now >= record_at:
                record_at = None
                self.hooks.on_still_running(task)
                continue
            if hard_deadline is not None and now >= hard_deadline:
                self.procs.signal(signal.SIGKILL)
                hard_deadline = None
                deadline = None
            elif deadline is not None and now >= deadline:
                if self.hooks.on_deadline(task, deadline + self.kill_grace):
                    self.procs.signal(signal.SIGTERM)
                hard_deadline = deadline + self.kill_grace
                deadline = None


_daemon_peak_seen = 0  # bytes: the daemon's high-water RSS at some earlier reading (a lower bound of it now)


def _above_daemon_peak(peak: int) -> bool:
    """Whether a task's peak RSS is above the daemon's own: at exec a child inherits the spawning process's
    high-water mark, so only a peak above the daemon's is the task's (task.Rusage.max_rss_exact). The daemon's
    mark only grows, so a reading after the task's end bounds what it inherited, and a peak not above an
    earlier reading is not above it now: most tasks need no getrusage. Threads may store readings out of
    order; a lower value only costs a later syscall, never a wrong answer."""
    global _daemon_peak_seen
    if peak <= _daemon_peak_seen:
        return False
    _daemon_peak_seen = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return peak > _daemon_peak_seen


def _worker_failed(exc: Exception) -> str:
    return f"the daemon's worker failed ({type(exc).__name__}: {exc}); its processes were stopped"
