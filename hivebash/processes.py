"""Which processes are a task's, and stopping them: identification by marker, group and tree; pidfd signals.

Facts this module is built on (docs/design.md, "Linux processes"):
- A grandchild that calls `setsid` leaves the group and `killpg` cannot reach it. The daemon is a child
  subreaper (hivebash/reaper.py), so such orphans become *its* children, and every process of a task carries
  the marker `HIVE_BASH_TASK=<id>:<nonce>` in its environment: a task's processes are the daemon's descendants
  that carry its marker, those in its process group (while the leader is unreaped, so the group id is ours),
  and their descendants (which covers a child that cleared its environment).
- Signals to identified processes go through pidfds opened after checking the process's start time, so a
  recycled pid can never receive a signal meant for a task.
"""

from __future__ import annotations

import functools
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

import psutil

MARKER_ENV = "HIVE_BASH_TASK"
T = TypeVar("T")
# After SIGKILL, how long to wait for the processes to be gone before recording the end anyway (a process
# stuck in uninterruptible sleep must not hold the state back; the timeout promise is deadline+grace+100 ms).
_AFTER_SIGKILL_WAIT = 0.05


@dataclass(frozen=True)
class ProcInfo:
    """A live process identified as a task's: the pid plus its start time, which together name it."""

    pid: int
    create_time: float
    marker: str


def proc_facts(proc: psutil.Process) -> tuple[int, float, str | None, int | None, str] | None:
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


def find_processes(  # noqa: C901 - replaced by the one tree search (issue 24, item 3)
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
    facts, kids = process_table(fresh_after)
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


class SharedReading(Generic[T]):
    """A reading of the kernel's state, shared by the callers that can use one taken after a given moment
    (many tasks ending at once then cost one read). The lock is held across the read, so a caller that comes
    meanwhile waits for that reading and shares it instead of making another."""

    def __init__(self, read: Callable[[], T]):
        self._read = read
        self._lock = threading.Lock()
        self._reading: tuple[float, T] | None = None  # (monotonic time taken, value)

    def get(self, fresh_after: float | None = None) -> T:
        """A reading taken after the monotonic `fresh_after`; None: a fresh one."""
        with self._lock:
            if self._reading is None or fresh_after is None or self._reading[0] < fresh_after:
                self._reading = (time.monotonic(), self._read())
            return self._reading[1]


@functools.cache
def _main_thread_children() -> str:
    """Where the kernel lists the main thread's children (its tid is the pid): worked out once, since each
    syscall of a worker waits for the GIL again under load (a fork's child works it out anew)."""
    return f"/proc/self/task/{os.getpid()}/children"


os.register_at_fork(after_in_child=_main_thread_children.cache_clear)


def _read_orphans() -> list[int] | None:
    try:
        fd = os.open(_main_thread_children(), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:  # os.read, not open(): a buffered text file costs four more syscalls (fstat, ioctl, lseek, read)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return [int(x) for x in b"".join(chunks).split()]
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


_orphans = SharedReading(_read_orphans)


def orphan_children(fresh_after: float | None = None) -> list[int] | None:
    """Pids of the processes re-parented to this subreaper, or None if the kernel does not say.

    The kernel attaches orphans to the subreaper's main thread, while task leaders are children of the worker
    threads that spawned them, so the main thread's `children` file lists exactly the orphans. psutil has no
    per-thread view; this one small read spares a scan of every process on the machine at each task end
    (it is the common case that there is none).

    `fresh_after` (monotonic): a reading taken after that moment may be shared. A task's worker passes the
    moment it saw the leader exit: the leader's children were re-parented before that (the kernel does it
    while the leader exits), so any later reading lists them. Under load most task ends then share one read.
    """
    return _orphans.get(fresh_after)


def _read_process_table() -> tuple[dict[int, tuple[int, float, str, psutil.Process]], dict[int, list[int]]]:
    facts: dict[int, tuple[int, float, str, psutil.Process]] = {}
    kids: dict[int, list[int]] = {}
    for proc in psutil.process_iter(["ppid", "create_time", "status"]):
        info = proc.info
        if info["ppid"] is None or info["create_time"] is None:
            continue
        facts[proc.pid] = (info["ppid"], info["create_time"], info["status"], proc)
        kids.setdefault(info["ppid"], []).append(proc.pid)
    return facts, kids


_table = SharedReading(_read_process_table)


def process_table(fresh_after: float | None) -> tuple[dict[int, tuple[int, float, str, psutil.Process]], dict[int, list[int]]]:
    """pid -> (ppid, create_time, status, Process) for every process, and ppid -> child pids: one read of
    each /proc/<pid>/stat (psutil), shared by callers that can use a table taken after `fresh_after`."""
    return _table.get(fresh_after)


def _find_everywhere(markers: dict[str, int | None], skip: set[int]) -> dict[str, list[ProcInfo]]:  # noqa: C901 - replaced by the one tree search (issue 24, item 3)
    """Every process on the machine, by marker or recorded group; descendants of those go with them."""
    by_group = {pgid: m for m, pgid in markers.items() if pgid is not None}
    facts = {}
    for proc in psutil.process_iter():
        if proc.pid != os.getpid():
            f = proc_facts(proc)
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
