"""The daemon as child subreaper, and the reaping of the orphans that brings it.

- Orphans of tasks (setsid escapees, `&` children of a finished shell) are re-parented to the daemon, not to
  init, so a kill can find and stop them (hivebash/processes/search.py); their zombies are then ours to reap.
- CPython's `Popen` takes ECHILD as exit status 0, so a stray `waitpid(-1)` would turn real exit codes into
  silent zeros: nothing here waits for "any child". Only pids identified as a task's processes are reaped.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import threading
from collections.abc import Callable, Iterable

import psutil

from common.process_seam import ProcInfo
from hivebash.processes.ops import TaskProcessOps
from hivebash.processes.search import orphan_children, proc_facts, process_table

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

    Spawns run side by side: one lock held across `Popen` would serialise them, and a `Popen` waiting for the
    GIL after its exec would hold up every other spawn and every worker's `drop_leader` (docs/performance.md,
    "Measurements behind the code").

    Each known orphan is watched through a pidfd (`watched`), which becomes readable when it dies: the
    housekeeper polls them, so no SIGCHLD handler is needed: one would run in the main (serving) thread at
    every task's exit only to find, almost always, that no orphan is known. `on_watch` is called (no lock
    held) when a pidfd is added, so a poll that is under way can start again with it.
    """

    def __init__(self, ops: TaskProcessOps, on_watch: Callable[[], None] = lambda: None) -> None:
        self._ops = ops  # the pidfds that watch orphans and their reaping go through the process seam
        self._children_changed = threading.Condition(threading.Lock())  # guards everything below
        self._spawning = 0  # Popen calls between fork and end_spawn
        self._reaping = False  # a reap waits for the spawns in flight; new ones wait for it
        self._leaders: dict[int, str] = {}  # pid -> marker of every unreaped task leader
        self._known: dict[int, float] = {}  # pid -> start time of every identified orphan (or future orphan)
        self._watch: dict[int, int] = {}  # pid -> pidfd, for the pids in _known; closed only by `reap`
        self._on_watch = on_watch

    def begin_spawn(self) -> None:
        """Before a `Popen` of a task leader; `end_spawn` must follow, whatever happens."""
        with self._children_changed:
            while self._reaping:
                self._children_changed.wait()
            self._spawning += 1

    def end_spawn(self, pid: int | None, marker: str) -> None:
        """After the `Popen` (pid None: it failed): register the new leader."""
        with self._children_changed:
            if pid is not None:
                self._leaders[pid] = marker
                self._known.pop(pid, None)
            self._spawning -= 1
            if not self._spawning:
                self._children_changed.notify_all()

    def drop_leader(self, pid: int) -> None:
        with self._children_changed:
            self._leaders.pop(pid, None)

    def leaders(self) -> dict[int, str]:
        with self._children_changed:
            return dict(self._leaders)

    def remember(self, procs: Iterable[ProcInfo]) -> None:
        with self._children_changed:
            added = sum(self._learn(info.pid, info.create_time) for info in procs if info.pid not in self._leaders)
        if added:
            self._on_watch()

    def _learn(self, pid: int, created: float) -> bool:
        """Know `pid` and watch it (lock held); True if a pidfd was added."""
        self._known[pid] = created
        if pid in self._watch:
            return False
        try:
            self._watch[pid] = self._ops.watch(pid)
        except OSError:
            return False  # already reaped (not ours): the next reap forgets it
        return True

    def watched(self) -> list[int]:
        """The pidfds of the known orphans, to poll for their deaths."""
        with self._children_changed:
            return list(self._watch.values())

    def has_known(self) -> bool:
        with self._children_changed:
            return bool(self._known)

    @property
    def knows_any(self) -> bool:
        """`has_known` without the lock, for hot paths: a hint (one atomic read)."""
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
        with self._children_changed:
            self._reaping = True
            try:
                while self._spawning:
                    self._children_changed.wait()
                reaped += self._reap_locked(children, markers)
            finally:
                self._reaping = False
                self._children_changed.notify_all()
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
                self._learn(pid, created)
        live = {c.pid for c in children}
        for pid in [p for p in self._known if p not in live and not psutil.pid_exists(p)]:
            del self._known[pid]  # gone (reaped by its worker, or it was not our child)
        self._unwatch_the_dead()
        return reaped

    def _unwatch_the_dead(self) -> None:
        """Close the pidfds of pids no longer known, and forget known pids whose pidfd says they died: reaped
        just now, or not our child (its own parent reaped it). A dead pidfd left in the set would keep the
        housekeeper's poll returning at once."""
        poller = select.poll()
        for fd in self._watch.values():
            poller.register(fd, select.POLLIN)
        dead = {fd for fd, _ in poller.poll(0)}
        for pid, fd in list(self._watch.items()):
            if pid not in self._known or fd in dead:
                self._known.pop(pid, None)
                os.close(self._watch.pop(pid))

    def _waitpid(self, pid: int) -> int:
        self._ops.reap_orphan(pid)
        self._known.pop(pid, None)
        return 1
