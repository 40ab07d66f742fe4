"""The daemon as child subreaper, and the reaping of the orphans that brings it.

- Orphans of tasks (setsid escapees, `&` children of a finished shell) are re-parented to the daemon, not to
  init, so a kill can find and stop them (hivebash/processes.py); their zombies are then ours to reap.
- CPython's `Popen` takes ECHILD as exit status 0, so a stray `waitpid(-1)` would turn real exit codes into
  silent zeros: nothing here waits for "any child". Only pids identified as a task's processes are reaped.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from typing import Callable, Iterable

import psutil

from .processes import ProcInfo, proc_facts, process_table, orphan_children

log = logging.getLogger(__name__)

_PR_SET_CHILD_SUBREAPER = 36


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
            facts, kids = process_table(None)
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
            facts = proc_facts(child)
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
