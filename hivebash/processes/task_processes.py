"""A task's processes other than its leader's exit: signalling the group and the escapees, finding them,
and the sweep after the leader of a killed or timed-out task has exited (before it is reaped, so the group id
is still ours)."""

from __future__ import annotations

import time
from collections.abc import Callable

from common.process_seam import ProcInfo
from hivebash.processes.ops import TaskProcessOps
from hivebash.processes.reaper import OrphanReaper
from hivebash.tasks.task import Task


class TaskProcesses:
    """What a task's worker does to the task's processes, through the process-operations seam."""

    def __init__(self, task: Task, ops: TaskProcessOps, reaper: OrphanReaper, subreaper: bool, kill_grace: float):
        self.task = task
        self.ops = ops
        self.reaper = reaper
        self.subreaper = subreaper
        self.kill_grace = kill_grace

    def signal(self, signum: int) -> None:
        """Signal the group (recorded pgid; the leader is unreaped so it is ours) and the escapees."""
        if self.task.pgid is not None:
            self.ops.signal_group(self.task.pgid, signum)
        escapees = self.find(group=False)
        if escapees:
            self.ops.signal(escapees, signum)

    def find(self, group: bool, fresh_after: float | None = None) -> list[ProcInfo]:
        task = self.task
        found = self.ops.find({task.marker: task.pgid if group else None}, self.subreaper,
                              exclude=() if task.pid is None else (task.pid,),
                              leaders=self.reaper.leaders(), fresh_after=fresh_after)
        return found[task.marker]

    def sweep(self, exited_at: float, wake_fd: int | None, closing: bool) -> list[ProcInfo]:
        """Stop what is left of a task being killed or timed out; return what survived. `wake_fd` turns
        readable when a kill is asked meanwhile (a forced one ends the grace at once)."""
        task = self.task
        if closing:
            return []  # the daemon is shutting down: one sweep of every task's processes follows (Engine.shutdown)
        procs = self.find(group=True)
        self.reaper.remember(procs)
        if not procs:
            return []
        if task.timed_out:
            hard = (task.started_mono or 0.0) + (task.timeout_secs or 0.0) + self.kill_grace
            self.ops.stop(procs, force=time.monotonic() >= hard, deadline=hard, wake_fd=wake_fd, escalate=self._forced)
        elif task.kill_signal:
            self.ops.stop(procs, force=task.kill_signal == "SIGKILL", deadline=exited_at + self.kill_grace,
                          wake_fd=wake_fd, escalate=self._forced)
        return [p for p in procs if self.ops.is_alive(p)]

    def _forced(self) -> bool:
        return self.task.kill_signal == "SIGKILL"


def stop_until_none_found(find: Callable[[], list[ProcInfo]], stop: Callable[[list[ProcInfo]], None],
                          rounds: int = 3) -> list[ProcInfo]:
    """Stop what `find` finds, and search again until it finds nothing (at most `rounds` searches): a shell
    in a loop forks its next command between a search and the signal by pid, and that child, not yet seen,
    outlived the kill (a restart's leftover `seq` wrote on past the output limit). Returns what was stopped."""
    stopped: list[ProcInfo] = []
    seen: set[tuple[int, float]] = set()
    for _ in range(rounds):
        procs = [p for p in find() if (p.pid, p.create_time) not in seen]
        if not procs:
            break
        stop(procs)
        stopped += procs
        seen.update((p.pid, p.create_time) for p in procs)
    return stopped
