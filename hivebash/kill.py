"""The `kill` request: cancel a pending task, signal a running one's group, or stop a finished task's leftovers.

Fire-and-forget: nothing here waits for a task to end. The worker of a running task does the rest (the
grace, the sweep of what the shell left); a kill only records what was asked and wakes it.
"""

from __future__ import annotations

import signal
import threading
import time

from common.config import BashSettings
from common.waiting import Doorbell

from . import task as T
from .entry import TaskEntry, TaskTable
from .lifecycle import Lifecycle
from .process_ops import ProcessOps
from .processes import ProcInfo
from .reaper import OrphanReaper


class Killer:
    """Kills, under the engine's `tasks_changed` condition (methods ending in `_locked`: held by the caller)."""

    def __init__(self, settings: BashSettings, tasks_changed: threading.Condition, table: TaskTable,
                 lifecycle: Lifecycle, reaper: OrphanReaper, wake: Doorbell, subreaper: bool, ops: ProcessOps):
        self.settings = settings
        self.tasks_changed = tasks_changed
        self.table = table
        self.lifecycle = lifecycle
        self.reaper = reaper
        self.wake = wake
        self.subreaper = subreaper
        self.ops = ops

    def kill(self, task_id: str, force: bool) -> tuple[str, str]:
        """(action, message): action is "cancelled", "signalled", "leftovers" or "nothing"."""
        sig = "SIGKILL" if force else "SIGINT"
        with self.tasks_changed:
            entry = self.table.get_locked(task_id)
            task = entry.task
            if task.state == T.PENDING and entry in self.table.queue:
                self.table.queue.remove(entry)
                ended = self.lifecycle.end_without_process_locked(entry, T.KILLED, "killed by request before it started")
            elif not task.terminal and (not entry.leader_exited or task.kill_signal or task.timed_out):
                # Running, or its worker is stopping what the leader left (a force kill escalates that at once).
                self.signal_locked(entry, sig)
                return "signalled", _signalled_message(task.id, sig, entry.leader_exited, force)
            else:
                ended, state, marker = None, task.state, task.marker
                candidates = _leftover_candidates_locked(entry)
        if ended is not None:
            self.lifecycle.record_ends([ended])
            return "cancelled", f"task {task_id} was pending: cancelled before it started"
        if state != T.RUNNING:  # (running: the leader stands for the group its worker is sweeping)
            candidates = [p for p in candidates if self.ops.is_alive(p)]
        if not candidates:
            return "nothing", f"task {task_id} has already ended ({state}); nothing to stop"
        threading.Thread(target=self._stop_leftovers, args=(marker, force), daemon=True).start()
        return "leftovers", (f"task {task_id} has already ended ({state}); stopping its leftover processes "
                             f"(pids {' '.join(str(p.pid) for p in candidates)})")

    def signal_locked(self, entry: TaskEntry, sig: str) -> None:
        """Record the kill and signal the group (recorded pgid) while its leader is unreaped; wake the worker."""
        task = entry.task
        if task.kill_signal != "SIGKILL":
            task.kill_signal = sig
        if task.state == T.RUNNING and not entry.leader_exited and task.pgid is not None:
            self.ops.signal_group(task.pgid, getattr(signal, sig))
        if entry.runner is not None:
            entry.runner.poke()

    def _stop_leftovers(self, marker: str, force: bool) -> None:
        procs = self.ops.find({marker: None}, self.subreaper, leaders=self.reaper.leaders())[marker]
        self.reaper.remember(procs)
        self.ops.stop(procs, force=force, deadline=time.monotonic() + self.settings.kill_grace)
        self.wake.ring()


def _signalled_message(task_id: str, sig: str, leader_exited: bool, force: bool) -> str:
    if leader_exited:
        message = f"task {task_id} is ending; {sig} goes to the processes it left behind"
    else:
        message = f"sent {sig} to the process group of task {task_id}; status(id=\"{task_id}\", wait_seconds=5) shows its end"
    return message if force else message + "; if it does not exit, call kill again with force=true"


def _leftover_candidates_locked(entry: TaskEntry) -> list[ProcInfo]:
    task = entry.task
    if task.state == T.RUNNING:  # leader exited, the worker is sweeping: it handles the group
        return [ProcInfo(task.pid or 0, 0.0, task.marker)]
    return list(entry.leftovers)
