"""The `kill` verb: cancel a pending task, signal a running one's group, or stop a finished task's leftovers.

The worker of a running task does the rest (the grace, the sweep of what the shell left); a kill records what
was asked and wakes it, then waits a moment (`wait_seconds`, default requests.KILL_WAIT_SECONDS, capped at 30) for the
end, so the answer says whether the task ended or ignored the signal. What a kill does is decided by the
task's state alone (states.py).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from common.process_seam import ProcInfo
from common.waiting import busy_advice
from hivebash.answers.answering import Waited
from hivebash.answers.outcomes import KillOutcome
from hivebash.answers.texts import FREE_A_SLOT
from hivebash.tasks import task as T
from hivebash.tasks.entry import TaskEntry
from hivebash.verbs.requests import KillRequest
from hivebash.verbs.rooms import Rooms

SIGNALLED = frozenset({T.STARTING, T.RUNNING, T.STOPPING, T.SWEEPING})  # its worker acts on a kill


def kill(rooms: Rooms, req: KillRequest) -> KillOutcome:
    task_id, force, window = req.task_id, req.force, req.window
    action, said = _kill(rooms, task_id, force)
    waited = Waited()
    if action == "signalled" and window.seconds > 0:  # past the wait bound: answer at once, as every wait does
        with rooms.registry.locked() as tasks:
            entry = tasks.get(task_id)
        waited = rooms.answers.wait([entry], window, lambda tasks, seen: seen)
    view = rooms.answers.view(task_id)
    message = said.text
    if action == "signalled" and window.seconds > 0:
        message = _after_wait(view.task, force, waited.seconds, said, not waited.skipped)
    return KillOutcome(view, action, message, wait_skipped=waited.skipped)


@dataclass(frozen=True)
class _Said:
    """A kill's answer before its wait: what was done, then what to do next (which the wait's own advice replaces)."""

    done: str
    then: str = ""

    @property
    def text(self) -> str:
        return self.done + self.then


def _after_wait(task: T.Task, force: bool, waited: float, said: _Said, slot: bool = True) -> str:
    """What the kill's short wait saw: the end, or what survived it and the next call; without a wait slot,
    that it did not wait (a task still running then has not been seen to ignore anything)."""
    if task.terminal:
        code = task.result.exit_code if task.result else None
        return f"{said.done}; it ended within {waited:.2f}s: status={task.state}" + (
            f" exit_code={code}" if code is not None else "")
    if not slot:
        return (f"{said.done}; not waited for its end: "
                + busy_advice(FREE_A_SLOT, f'status(id="{task.id}", wait_seconds=5) shows its end')
                + ("" if force else f'; if it does not end, kill(id="{task.id}", force=true) sends SIGKILL'))
    sig = "SIGKILL" if force else "SIGINT"
    if force:
        return f"{said.text}; still running {waited:.2f}s after {sig}: status(id=\"{task.id}\", wait_seconds=5)"
    return (f"sent {sig} to the process group of task {task.id}; still running {waited:.2f}s later (it ignores or "
            f"handles SIGINT): kill(id=\"{task.id}\", force=true) sends SIGKILL")


def _kill(rooms: Rooms, task_id: str, force: bool) -> tuple[str, _Said]:
    """(action, answer): action is "cancelled", "signalled", "leftovers" or "nothing"."""
    sig = "SIGKILL" if force else "SIGINT"
    with rooms.registry.locked() as tasks:
        entry = tasks.get(task_id)
        task = entry.task
        if task.state == T.PENDING:
            ended = tasks.cancel(entry, T.KILLED, "killed by request before it started")
        elif task.state in SIGNALLED:  # sweeping: its worker stops what the shell left (a force kill escalates)
            tasks.request_stop(entry, sig)
            return "signalled", _signalled_message(task.id, sig, task.state == T.SWEEPING, force)
        else:  # exited, ending or ended
            ended, state, marker = None, task.state, task.marker
            shown = task.shown_state
            candidates = _leftover_candidates(entry)
    if ended is not None:
        rooms.lifecycle.record_ends([ended])
        return "cancelled", _Said(f"task {task_id} was pending: cancelled before it started")
    if state != T.EXITED:  # (exited: the leader stands for the group its worker is searching)
        candidates = [p for p in candidates if rooms.ops.is_alive(p)]
    if not candidates:
        return "nothing", _Said(f"task {task_id} has already ended ({shown}); nothing to stop")
    threading.Thread(target=_stop_leftovers, args=(rooms, marker, force), daemon=True).start()
    return "leftovers", _Said(f"task {task_id} has already ended ({shown}); stopping its leftover processes "
                              f"(pids {' '.join(str(p.pid) for p in candidates)})")


def _stop_leftovers(rooms: Rooms, marker: str, force: bool) -> None:
    procs = rooms.ops.find({marker: None}, rooms.subreaper, leaders=rooms.reaper.leaders())[marker]
    rooms.reaper.remember(procs)
    rooms.ops.stop(procs, force=force, deadline=time.monotonic() + rooms.settings.kill_grace)
    rooms.wake.ring()


def _signalled_message(task_id: str, sig: str, shell_exited: bool, force: bool) -> _Said:
    if shell_exited:
        done, then = f"task {task_id} is ending; {sig} goes to the processes it left behind", ""
    else:
        done = f"sent {sig} to the process group of task {task_id}"
        then = f"; status(id=\"{task_id}\", wait_seconds=5) shows its end"
    return _Said(done, then if force else then + "; if it does not exit, call kill again with force=true")


def _leftover_candidates(entry: TaskEntry) -> list[ProcInfo]:
    task = entry.task
    if task.state == T.EXITED:  # its worker is searching what the shell left: it handles the group
        return [ProcInfo(task.pid or 0, 0.0, task.marker)]
    return list(entry.leftovers)
