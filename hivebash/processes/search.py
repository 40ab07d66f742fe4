"""Which processes are a task's: identification by marker, group and tree (signalling and stopping them:
common/process_seam.py).

Facts this module is built on (docs/design.md, "Linux processes"):
- A grandchild that calls `setsid` leaves the group and `killpg` cannot reach it. The daemon is a child
  subreaper (hivebash/processes/reaper.py), so such orphans become *its* children, and every process of a task carries
  the marker `HIVE_BASH_TASK=<id>:<nonce>` in its environment: a task's processes are the daemon's descendants
  that carry its marker, those in its process group (while the leader is unreaped, so the group id is ours),
  and their descendants (which covers a child that cleared its environment).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

import psutil

from common.process_seam import ProcInfo

MARKER_ENV = "HIVE_BASH_TASK"
T = TypeVar("T")


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
    search = _TreeSearch(markers, skip, leaders or {}, fresh_after)
    for root in search.kids.get(os.getpid(), ()):
        search.visit(root)
    return search.found


class _TreeSearch:
    """This process's descendants, by task: a subtree under a task leader, or under a root that carries a
    task's marker or is in its group, is that task's; below any other root the search goes on."""

    def __init__(self, markers: dict[str, int | None], skip: set[int], leaders: dict[int, str],
                 fresh_after: float | None):
        self.markers, self.skip, self.leaders = markers, skip, leaders
        self.by_group = {pgid: m for m, pgid in markers.items() if pgid is not None}
        self.facts, self.kids = process_table(fresh_after)
        self.found: dict[str, list[ProcInfo]] = {m: [] for m in markers}

    def visit(self, pid: int) -> None:
        if pid in self.leaders:
            if self.leaders[pid] in self.markers:
                self._claim(pid, self.leaders[pid])
            return  # another task's tree
        marker, pgid = self._identity(pid)
        if marker in self.markers:
            self._claim(pid, marker)
        elif pgid in self.by_group:
            self._claim(pid, self.by_group[pgid])
        else:
            for child in self.kids.get(pid, ()):
                self.visit(child)

    def _identity(self, pid: int) -> tuple[str | None, int | None]:
        """(marker, pgid) of a live process; (None, None) for a zombie or one that cannot be read."""
        _, _, status, proc = self.facts[pid]
        if status == psutil.STATUS_ZOMBIE:
            return None, None
        marker = None
        try:
            marker = proc.environ().get(MARKER_ENV)
            return marker, os.getpgid(pid)  # compared with the group recorded at spawn only
        except (psutil.Error, OSError):
            return marker, None

    def _claim(self, pid: int, marker: str) -> None:
        stack = [pid]
        while stack:
            p = stack.pop()
            _, created, status, _ = self.facts[p]
            if status != psutil.STATUS_ZOMBIE and p not in self.skip:
                self.found[marker].append(ProcInfo(p, created, marker))
            stack.extend(self.kids.get(p, ()))


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


def process_table(fresh_after: float | None) -> tuple[dict[int, tuple[int, float, str, psutil.Process]],
                                                      dict[int, list[int]]]:
    """pid -> (ppid, create_time, status, Process) for every process, and ppid -> child pids: one read of
    each /proc/<pid>/stat (psutil), shared by callers that can use a table taken after `fresh_after`."""
    return _table.get(fresh_after)


def _find_everywhere(markers: dict[str, int | None], skip: set[int]) -> dict[str, list[ProcInfo]]:
    """Every process on the machine, by marker or recorded group; descendants of those go with them."""
    facts = _every_process()
    found: dict[str, list[ProcInfo]] = {m: [] for m in markers}
    for pid, marker in _owners(facts, markers).items():
        _, created, _, pgid, status = facts[pid]
        if pid not in skip and status != psutil.STATUS_ZOMBIE:
            found[marker].append(ProcInfo(pid, created, marker, pgid))
    return found


def _every_process() -> dict[int, tuple[int, float, str | None, int | None, str]]:
    """pid -> `proc_facts` of every readable process on the machine but this one."""
    facts = {}
    for proc in psutil.process_iter():
        if proc.pid != os.getpid():
            f = proc_facts(proc)
            if f is not None:
                facts[proc.pid] = f
    return facts


def _owners(facts: dict[int, tuple[int, float, str | None, int | None, str]],
            markers: dict[str, int | None]) -> dict[int, str]:
    """pid -> marker of each process a task owns: by its marker or recorded group, or by an owned ancestor."""
    by_group = {pgid: m for m, pgid in markers.items() if pgid is not None}
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
    return owner
