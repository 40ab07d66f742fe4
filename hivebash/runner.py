"""One worker thread per task: spawn, wait, time out, signal the group, find escapees, reap with rusage.

Facts this module is built on (../shared/FACTS.md, "Processes"):
- `preexec_fn` is unsafe in a threaded process: the new session comes from `start_new_session=True`.
- Non-interactive bash makes `&` children ignore SIGINT, so after a graceful kill the group leader may be gone
  while its children live on: once the leader has exited, whatever is left of the task is stopped too
  (SIGTERM, then SIGKILL after the grace).
- A grandchild that calls `setsid` leaves the group and `killpg` cannot reach it. The daemon makes itself a
  child subreaper, so such orphans become *its* children, and every process of a task carries the marker
  `HIVE_BASH_TASK=<id>:<nonce>` in its environment: a task's processes are the daemon's descendants that
  carry its marker, those in its process group (while the leader is unreaped, so the group id is ours), and
  their descendants (which covers a child that cleared its environment).
- A group id stays reserved while its leader is an unreaped zombie: the exit is observed without reaping
  (pidfd readable, then `waitid(WNOWAIT)`), the group is swept, and only then is the leader reaped with
  `wait4` (for its rusage). The group id recorded at spawn is used for every signal; never `os.getpgid`.
- CPython's `Popen` takes ECHILD as exit status 0, so a stray `waitpid(-1)` would turn real exit codes into
  silent zeros: nothing here waits for "any child". Only pids identified as a task's processes are reaped.
- Signals to identified processes go through pidfds opened after checking the process's start time, so a
  recycled pid can never receive a signal meant for a task.
"""

from __future__ import annotations

import collections
import ctypes
import logging
import os
import resource
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Protocol

import psutil

from .store import TaskStore
from .task import Rusage, Task

log = logging.getLogger(__name__)

MARKER_ENV = "HIVE_BASH_TASK"
_PR_SET_CHILD_SUBREAPER = 36
# After SIGKILL, how long to wait for the processes to be gone before recording the end anyway (a process
# stuck in uninterruptible sleep must not hold the state back; the timeout promise is deadline+grace+100 ms).
_AFTER_SIGKILL_WAIT = 0.05
# A task still running this long after its spawn gets its `running` record written (by its worker, which
# is idle then); one that ends sooner goes from its pending record straight to its terminal one. Most agent
# commands are short: writing a record for a state the disk would hold for a millisecond cost every such task
# one file creation, fsync and rename more, and as a write racing the worker's it delayed the inline answer
# (scripts/bench.py: run("true", wait 30) 2.81x -> 2.65x of subprocess with the write taken out of the way).
# What a crash in this window leaves is the pending record, whose marker is all a restart needs to find and
# stop the task's processes (and Engine.start then says the task was running when it finds them).
RUNNING_RECORD_DELAY = 0.05


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (orphans are re-parented to it, not to init).

    libc is opened by its soname: `ctypes.util.find_library` would spawn a helper process of its own.
    """
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    except OSError as exc:
        log.warning("cannot become a child subreaper (%s): setsid escapees will be searched system-wide", exc)
        return False
    return True


@dataclass(frozen=True)
class ProcInfo:
    """A live process identified as a task's: the pid plus its start time, which together name it."""

    pid: int
    create_time: float
    marker: str


def _proc_facts(proc: psutil.Process) -> tuple[int, float, str | None, int | None, str] | None:
    """(ppid, create_time, marker, pgid, status) of a process, or None if it is gone or unreadable."""
    try:
        with proc.oneshot():
            status = proc.status()
            ppid, created = proc.ppid(), proc.create_time()
            marker = None if status == psutil.STATUS_ZOMBIE else proc.environ().get(MARKER_ENV)
        pgid = os.getpgid(proc.pid)  # only compared with the group recorded at spawn
    except (psutil.Error, OSError):
        return None
    return ppid, created, marker, pgid, status


def find_processes(
    markers: dict[str, int | None], descendants_only: bool, exclude: Iterable[int] = (),
    leaders: dict[int, str] | None = None, fresh_after: float | None = None,
) -> dict[str, list[ProcInfo]]:
    """The live processes of each task, by marker. `markers` maps a marker to the task's process group id,
    or None once that id can no longer be trusted (leader reaped). Zombies are dead: they are not listed.

    `descendants_only` limits the search to this process's descendants, which, for a subreaper, is where
    every process of its tasks is. There the tree does most of the work: a subtree under a task leader
    (`leaders`: pid -> marker) is that task's, and only the roots of other subtrees (orphans re-parented to
    us) have their environment read. Otherwise every process on the machine is read (after a restart, or
    when the daemon could not become a subreaper). `fresh_after` (monotonic): a table of processes taken
    after that moment may be shared with other callers (many tasks ending at once cost one scan); None
    always reads afresh (a sweep that is about to signal).
    """
    skip = set(exclude)
    if not descendants_only:
        return _find_everywhere(markers, skip)
    me = os.getpid()
    leaders = leaders or {}
    by_group = {pgid: m for m, pgid in markers.items() if pgid is not None}
    facts, kids = _process_table(fresh_after)
    found: dict[str, list[ProcInfo]] = {m: [] for m in markers}

    def claim(pid: int, marker: str) -> None:
        stack = [pid]
        while stack:
            p = stack.pop()
            _, created, status, _ = facts[p]
            if status != psutil.STATUS_ZOMBIE and p not in skip:
                found[marker].append(ProcInfo(p, created, marker))
            stack.extend(kids.get(p, ()))

    def visit(pid: int) -> None:
        if pid in leaders:
            if leaders[pid] in markers:
                claim(pid, leaders[pid])
            return  # another task's tree
        _, _, status, proc = facts[pid]
        marker, pgid = None, None
        if status != psutil.STATUS_ZOMBIE:
            try:
                marker = proc.environ().get(MARKER_ENV)
                pgid = os.getpgid(pid)  # compared with the group recorded at spawn only
            except (psutil.Error, OSError):
                pass
        if marker in markers:
            claim(pid, marker)
        elif pgid in by_group:
            claim(pid, by_group[pgid])
        else:
            for child in kids.get(pid, ()):
                visit(child)

    for root in kids.get(me, ()):
        visit(root)
    return found


def orphan_children() -> list[int] | None:
    """Pids of the processes re-parented to this subreaper, or None if the kernel does not say.

    The kernel attaches orphans to the subreaper's main thread, while task leaders are children of the worker
    threads that spawned them, so the main thread's `children` file lists exactly the orphans. psutil has no
    per-thread view; this one small read spares a scan of every process on the machine at each task end
    (it is the common case that there is none).
    """
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return None


_table_lock = threading.Lock()
_table: tuple[float, dict, dict] | None = None


def _process_table(fresh_after: float | None) -> tuple[dict[int, tuple[int, float, str, psutil.Process]], dict[int, list[int]]]:
    """pid -> (ppid, create_time, status, Process) for every process, and ppid -> child pids: one read of
    each /proc/<pid>/stat (psutil), shared by callers that can use a table taken after `fresh_after`."""
    global _table
    with _table_lock:
        if fresh_after is not None and _table is not None and _table[0] >= fresh_after:
            return _table[1], _table[2]
        taken = time.monotonic()
        facts: dict[int, tuple[int, float, str, psutil.Process]] = {}
        kids: dict[int, list[int]] = {}
        for proc in psutil.process_iter(["ppid", "create_time", "status"]):
            info = proc.info
            if info["ppid"] is None or info["create_time"] is None:
                continue
            facts[proc.pid] = (info["ppid"], info["create_time"], info["status"], proc)
            kids.setdefault(info["ppid"], []).append(proc.pid)
        _table = (taken, facts, kids)
        return facts, kids


def _find_everywhere(markers: dict[str, int | None], skip: set[int]) -> dict[str, list[ProcInfo]]:
    """Every process on the machine, by marker or recorded group; descendants of those go with them."""
    by_group = {pgid: m for m, pgid in markers.items() if pgid is not None}
    facts = {}
    for proc in psutil.process_iter():
        if proc.pid != os.getpid():
            f = _proc_facts(proc)
            if f is not None:
                facts[proc.pid] = f
    owner: dict[int, str] = {}
    for pid, (_, _, marker, pgid, _) in facts.items():
        if marker in markers:
            owner[pid] = marker
        elif pgid in by_group:
            owner[pid] = by_group[pgid]
    changed = True
    while changed:  # descendants of an identified process are the same task's, whatever their environment
        changed = False
        for pid, (ppid, *_rest) in facts.items():
            if pid not in owner and ppid in owner:
                owner[pid] = owner[ppid]
                changed = True
    found: dict[str, list[ProcInfo]] = {m: [] for m in markers}
    for pid, marker in owner.items():
        _, created, _, _, status = facts[pid]
        if pid not in skip and status != psutil.STATUS_ZOMBIE:
            found[marker].append(ProcInfo(pid, created, marker))
    return found


class ProcSet:
    """Identified processes held by pidfds: signal them and wait for them without any pid-reuse race."""

    def __init__(self, procs: Iterable[ProcInfo]):
        self.fds: dict[int, ProcInfo] = {}
        for info in procs:
            try:
                fd = os.pidfd_open(info.pid)
            except OSError:
                continue  # already gone
            try:
                same = psutil.Process(info.pid).create_time() == info.create_time
            except psutil.Error:
                same = False
            if same:
                self.fds[fd] = info
            else:
                os.close(fd)

    def __len__(self) -> int:
        return len(self.fds)

    def signal(self, signum: int) -> None:
        for fd in list(self.fds):
            try:
                signal.pidfd_send_signal(fd, signum)
            except ProcessLookupError:
                pass

    def wait(self, deadline: float, wake_fd: int | None = None) -> str:
        """Wait until every process has exited ("gone"), the monotonic `deadline` passes ("deadline"), or
        `wake_fd` becomes readable ("woken")."""
        poller = select.poll()
        for fd in self.fds:
            poller.register(fd, select.POLLIN)
        if wake_fd is not None:
            poller.register(wake_fd, select.POLLIN)
        pending = set(self.fds)
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "deadline"
            for fd, _ in poller.poll(remaining * 1000):
                if fd == wake_fd:
                    return "woken"
                pending.discard(fd)
                poller.unregister(fd)
        return "gone"

    def alive(self) -> list[ProcInfo]:
        gone = set()
        poller = select.poll()
        for fd in self.fds:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(0):
            gone.add(fd)
        return [info for fd, info in self.fds.items() if fd not in gone]

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()


def stop_processes(procs: Iterable[ProcInfo], force: bool, deadline: float, wake_fd: int | None = None,
                   escalate: Callable[[], bool] | None = None) -> None:
    """SIGTERM (or SIGKILL when `force`), wait until `deadline`, then SIGKILL whatever is left.

    `wake_fd` readable and `escalate()` true (a forced kill arrived during the grace): SIGKILL at once.
    """
    held = ProcSet(procs)
    try:
        if not held:
            return
        if not force:
            held.signal(signal.SIGTERM)
            while True:
                outcome = held.wait(deadline, wake_fd)
                if outcome == "gone":
                    return
                if outcome == "deadline":
                    break
                drain_eventfd(wake_fd)
                if escalate is not None and escalate():
                    break
        held.signal(signal.SIGKILL)
        held.wait(time.monotonic() + _AFTER_SIGKILL_WAIT)
    finally:
        held.close()


def drain_eventfd(fd: int | None) -> None:
    if fd is None:
        return
    try:
        os.eventfd_read(fd)
    except BlockingIOError:
        pass


def is_alive(info: ProcInfo) -> bool:
    """True if the process named by (pid, start time) still runs (a zombie does not)."""
    try:
        proc = psutil.Process(info.pid)
        return proc.create_time() == info.create_time and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class OrphanReaper:
    """Reaps the zombies of task processes re-parented to the daemon (it is a subreaper), by pid.

    A zombie child is reaped only if it was identified (by marker or group) while alive and its start
    time still matches: never a pid we did not identify, never a task leader (its worker reaps it with
    `wait4`), and never `waitpid(-1)`. A reap never runs while a `Popen` is between its fork and the
    registration of the new leader (`begin_spawn`/`end_spawn`), so a new leader is never mistaken for a
    known orphan whose pid it reused.

    Spawns run side by side: one lock held across `Popen` serialised them, and a `Popen` waiting for the GIL
    after its exec then held up every other spawn and every worker's `drop_leader` (scripts/bench.py,
    throughput with 8 clients: waits of ~20 ms each on that lock).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())  # guards everything below
        self._spawning = 0  # Popen calls between fork and end_spawn
        self._reaping = False  # a reap waits for the spawns in flight; new ones wait for it
        self._leaders: dict[int, str] = {}  # pid -> marker of every unreaped task leader
        self._known: dict[int, float] = {}

    def begin_spawn(self) -> None:
        """Before a `Popen` of a task leader; `end_spawn` must follow, whatever happens."""
        with self._cond:
            while self._reaping:
                self._cond.wait()
            self._spawning += 1

    def end_spawn(self, pid: int | None, marker: str) -> None:
        """After the `Popen` (pid None: it failed): register the new leader."""
        with self._cond:
            if pid is not None:
                self._leaders[pid] = marker
                self._known.pop(pid, None)
            self._spawning -= 1
            if not self._spawning:
                self._cond.notify_all()

    def drop_leader(self, pid: int) -> None:
        with self._cond:
            self._leaders.pop(pid, None)

    def leaders(self) -> dict[int, str]:
        with self._cond:
            return dict(self._leaders)

    def remember(self, procs: Iterable[ProcInfo]) -> None:
        with self._cond:
            for info in procs:
                if info.pid not in self._leaders:
                    self._known[info.pid] = info.create_time

    def has_known(self) -> bool:
        with self._cond:
            return bool(self._known)

    @property
    def knows_any(self) -> bool:
        """`has_known` without the lock, for a signal handler and hot paths: a hint (one atomic read)."""
        return bool(self._known)

    def reap(self, our_markers: Callable[[], set[str]] | None = None) -> int:
        """Reap identified zombie children; learn live orphans that carry one of `our_markers`."""
        reaped = 0
        orphans = orphan_children()
        if orphans is None:
            facts, kids = _process_table(None)
            orphans = kids.get(os.getpid(), [])
        children = []
        for pid in orphans:
            try:
                children.append(psutil.Process(pid))
            except psutil.Error:
                continue
        markers = our_markers() if our_markers else set()
        with self._cond:
            self._reaping = True
            try:
                while self._spawning:
                    self._cond.wait()
                reaped += self._reap_locked(children, markers)
            finally:
                self._reaping = False
                self._cond.notify_all()
        return reaped

    def _reap_locked(self, children: list[psutil.Process], markers: set[str]) -> int:
        reaped = 0
        for child in children:
            pid = child.pid
            if pid in self._leaders:
                continue
            facts = _proc_facts(child)
            if facts is None:
                continue
            _, created, marker, _, status = facts
            if status == psutil.STATUS_ZOMBIE:
                if self._known.get(pid) == created:
                    reaped += self._waitpid(pid)
            elif marker in markers:
                self._known[pid] = created
        live = {c.pid for c in children}
        for pid in [p for p in self._known if p not in live and not psutil.pid_exists(p)]:
            del self._known[pid]  # gone (reaped by its worker, or it was not our child)
        return reaped

    def _waitpid(self, pid: int) -> int:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        self._known.pop(pid, None)
        return 1


class WorkerPool:
    """Long-lived threads that run task workers, so starting a task never waits for a new thread.

    `Thread.start` returns only once the new thread runs, which under load means once it got the GIL: `run`
    waited ~10 ms there per task (scripts/bench.py throughput, 8 clients; engine.run's median was 14-20 ms of
    which the disk took ~4). An idle pooled thread is woken by a lock release instead, and the caller goes on.
    The pool grows to the number of tasks running at once. Up to `keep_idle` idle threads wait for work for
    `idle_seconds`; more than that retire after `surplus_seconds`, so a burst of long tasks does not leave an
    idle daemon with hundreds of threads.
    """

    def __init__(self, name: str, keep_idle: int = 8, idle_seconds: float = 60.0, surplus_seconds: float = 0.5):
        self.name = name
        self.keep_idle = keep_idle
        self.idle_seconds = idle_seconds
        self.surplus_seconds = surplus_seconds
        self._cond = threading.Condition(threading.Lock())
        self._jobs: collections.deque[Callable[[], None]] = collections.deque()
        self._idle = 0
        self._live = 0
        self._serial = 0

    def submit(self, job: Callable[[], None]) -> None:
        """Run `job` in a pooled thread: an idle one if there is one for it, else a new one."""
        with self._cond:
            self._jobs.append(job)
            if self._idle >= len(self._jobs):  # every queued job has an idle thread to take it
                self._cond.notify()
                return
            self._live += 1
            self._serial += 1
            number = self._serial
        threading.Thread(target=self._work, name=f"{self.name}-{number}", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._cond:
                linger = self.idle_seconds if self._idle < self.keep_idle else self.surplus_seconds
                deadline = time.monotonic() + linger
                self._idle += 1
                while not self._jobs:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        self._idle -= 1
                        self._live -= 1
                        return
                    self._cond.wait(remaining)
                self._idle -= 1
                job = self._jobs.popleft()
            try:
                job()
            except Exception:  # a job handles its own errors; this only keeps the thread alive
                log.exception("pooled job failed")

    def threads(self) -> int:
        """Threads started and not yet retired (for tests and diagnostics)."""
        with self._cond:
            return self._live


class RunnerHooks(Protocol):
    """What the engine does at each step of a task's life (it holds its lock, transitions, persists)."""

    def on_spawned(self, task: Task, pid: int, create_time: float, started_mono: float) -> None: ...

    def on_still_running(self, task: Task) -> None: ...

    def on_spawn_failed(self, task: Task, error: str) -> None: ...

    def on_deadline(self, task: Task) -> bool: ...

    def on_leader_exited(self, task: Task) -> None: ...

    def on_ended(self, task: Task, status: int, rusage: Rusage, duration: float, leftovers: list[ProcInfo]) -> None: ...

    def on_leftovers(self, task: Task, procs: list[ProcInfo]) -> None: ...


class TaskRunner:
    """Runs one task from spawn to reaped, in its own thread. The engine asks for kills by setting
    `task.kill_signal`, signalling the group itself, and calling `poke()` so the worker re-evaluates."""

    def __init__(self, task: Task, store: TaskStore, reaper: OrphanReaper, hooks: RunnerHooks,
                 kill_grace: float, subreaper: bool, env: dict[str, str] | None = None, pool: WorkerPool | None = None):
        self.task = task
        self.store = store
        self.reaper = reaper
        self.hooks = hooks
        self.kill_grace = kill_grace
        self.subreaper = subreaper
        # None: the daemon's environment, copied at spawn, not here (runners are made under the engine's lock,
        # and copying os.environ takes ~25 us).
        self.base_env = env
        self.daemon_peak_rss = 0
        # An eventfd the engine writes to (kill asked) and the worker polls beside the leader's pidfd. Made by
        # `start`, outside the engine's lock (which builds runners): a syscall there gives up the GIL while
        # holding that lock. A poke before then is kept in `_poked`.
        self._wake: int | None = None
        self._poked = False
        self._wake_lock = threading.Lock()
        self.pool = pool
        self._done = threading.Event()

    def start(self) -> None:
        """Called once, by whoever took the task from the queue, after it released the engine's lock."""
        wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        with self._wake_lock:
            self._wake = wake
            if self._poked:
                os.eventfd_write(wake, 1)
        if self.pool is not None:
            self.pool.submit(self._main)
        else:
            threading.Thread(target=self._main, name=f"task-{self.task.id}", daemon=True).start()

    def join(self, timeout: float) -> bool:
        """Wait until the worker has finished (a runner not started yet is waited for too); True if it has."""
        return self._done.wait(timeout)

    def poke(self) -> None:
        """Wake the worker (a kill was asked); never blocks."""
        with self._wake_lock:
            if self._wake is not None:
                os.eventfd_write(self._wake, 1)
            else:
                self._poked = True

    def _main(self) -> None:
        thread = threading.current_thread()
        pooled_name, thread.name = thread.name, f"task-{self.task.id}"  # for the log and py-spy
        try:
            proc = self._spawn()
            if proc is not None:
                self._supervise(proc)
        except Exception:  # a worker must never die silently: the task would stay "running" forever
            log.exception("worker of task %s failed", self.task.id)
            self.hooks.on_spawn_failed(self.task, "internal error in the worker (see the daemon log)")
        finally:
            with self._wake_lock:
                os.close(self._wake)
                self._wake = None
            thread.name = pooled_name
            self._done.set()

    def _spawn(self) -> subprocess.Popen | None:
        task = self.task
        env = {k: v for k, v in (os.environ if self.base_env is None else self.base_env).items() if k != MARKER_ENV}
        env[MARKER_ENV] = task.marker
        try:
            out, err = self.store.open_outputs(task.id)
        except OSError as exc:
            self.hooks.on_spawn_failed(task, f"cannot open the output files: {exc}")
            return None
        try:
            self.daemon_peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            self.reaper.begin_spawn()
            proc = None
            try:
                proc = subprocess.Popen(
                    ["bash", "-c", task.cmd], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    cwd=task.cwd, env=env, start_new_session=True, close_fds=True,
                )
            finally:
                self.reaper.end_spawn(proc.pid if proc is not None else None, task.marker)
            started = time.monotonic()
        except OSError as exc:
            self.hooks.on_spawn_failed(task, f"cannot start bash: {exc}")
            return None
        finally:
            os.close(out)
            os.close(err)
        try:
            created = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            created = 0.0  # already a reaped... impossible while unreaped; zombie still has a start time
        self.hooks.on_spawned(task, proc.pid, created, started)
        return proc

    def _supervise(self, proc: subprocess.Popen) -> None:
        task, pid = self.task, proc.pid
        pidfd = os.pidfd_open(pid)
        try:
            exited_at = self._wait_leader(pidfd)
        finally:
            os.close(pidfd)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # it has exited: returns at once, reaps nothing
        self.hooks.on_leader_exited(task)
        stopping = bool(task.kill_signal or task.timed_out)
        leftovers = self._sweep(exited_at) if stopping else []
        _, status, usage = os.wait4(pid, 0)
        proc.returncode = status  # so Popen never polls this pid again (a recycled pid would be reaped)
        self.reaper.drop_leader(pid)
        peak = usage.ru_maxrss * 1024
        rusage = Rusage(usage.ru_utime, usage.ru_stime, peak, max_rss_exact=peak > self.daemon_peak_rss)
        self.hooks.on_ended(task, status, rusage, exited_at - (task.started_mono or exited_at), leftovers)
        if not stopping and not getattr(self.hooks, "closing", False) and not (self.subreaper and orphan_children() == []):
            # A natural exit: background processes may live on, and are only reported (kill stops them), so
            # the search runs after the result is out, on a process table possibly shared with other tasks.
            # As a subreaper with no orphan at all, there is nothing to search: anything of the task that
            # outlived its shell would have been re-parented to us.
            found = self._find(group=False, fresh_after=exited_at)
            if found:
                self.reaper.remember(found)
                self.hooks.on_leftovers(task, found)

    def _wait_leader(self, pidfd: int) -> float:
        """Wait for the leader's exit, handling the deadline and kill requests; return the monotonic exit time."""
        task = self.task
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.register(self._wake, select.POLLIN)
        deadline = (task.started_mono or time.monotonic()) + task.timeout_secs if task.timeout_secs else None
        hard_deadline: float | None = None  # when SIGKILL follows the SIGTERM of a timeout
        record_at: float | None = (task.started_mono or time.monotonic()) + RUNNING_RECORD_DELAY
        while True:
            now = time.monotonic()
            target = hard_deadline if hard_deadline is not None else deadline
            if record_at is not None:
                target = record_at if target is None else min(target, record_at)
            timeout_ms = None if target is None else max(0.0, (target - now) * 1000)
            events = dict(poller.poll(timeout_ms))
            if pidfd in events:
                return time.monotonic()
            if self._wake in events:
                drain_eventfd(self._wake)
                continue
            now = time.monotonic()
            if record_at is not None and now >= record_at:
                record_at = None
                self.hooks.on_still_running(task)
                continue
            if hard_deadline is not None and now >= hard_deadline:
                self._signal_task(signal.SIGKILL)
                hard_deadline = None
                deadline = None
            elif deadline is not None and now >= deadline:
                if self.hooks.on_deadline(task):
                    self._signal_task(signal.SIGTERM)
                hard_deadline = deadline + self.kill_grace
                deadline = None

    def _signal_task(self, signum: int) -> None:
        """Signal the group (recorded pgid; the leader is unreaped so it is ours) and the escapees."""
        try:
            os.killpg(self.task.pgid, signum)
        except ProcessLookupError:
            pass
        escapees = self._find(group=False)
        if escapees:
            held = ProcSet(escapees)
            held.signal(signum)
            held.close()

    def _find(self, group: bool, fresh_after: float | None = None) -> list[ProcInfo]:
        task = self.task
        found = find_processes({task.marker: task.pgid if group else None}, self.subreaper, exclude={task.pid},
                               leaders=self.reaper.leaders(), fresh_after=fresh_after)
        return found[task.marker]

    def _sweep(self, exited_at: float) -> list[ProcInfo]:
        """After the leader exited, before it is reaped (its group id is still ours): stop what is left of
        a task being killed or timed out; return what survived."""
        task = self.task
        if getattr(self.hooks, "closing", False):
            return []  # the daemon is shutting down: one sweep of every task's processes follows (Engine.shutdown)
        procs = self._find(group=True)
        self.reaper.remember(procs)
        if not procs:
            return []
        if task.timed_out:
            hard = self._timeout_hard_deadline()
            stop_processes(procs, force=time.monotonic() >= hard, deadline=hard, wake_fd=self._wake,
                           escalate=self._forced)
        elif task.kill_signal:
            force = task.kill_signal == "SIGKILL"
            stop_processes(procs, force=force, deadline=exited_at + self.kill_grace, wake_fd=self._wake,
                           escalate=self._forced)
        return [p for p in procs if is_alive(p)]

    def _forced(self) -> bool:
        return self.task.kill_signal == "SIGKILL"

    def _timeout_hard_deadline(self) -> float:
        task = self.task
        return (task.started_mono or 0.0) + (task.timeout_secs or 0.0) + self.kill_grace
