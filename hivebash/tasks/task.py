"""A bash task's record, its result, and the one guarded transition (the states and their table: states.py).

Nothing here does I/O. The record (what was asked: command, cwd, timeout, process ids) and the result
(what happened: exit code, signal, duration, rusage) are kept apart, as pueue does, so a result is only
ever attached once, by the transition into a terminal state.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from common.names import InvalidName, check_name
from common.signals import signal_name
from hivebash.errors import EngineError
from hivebash.tasks.states import (
    ACTIVE,
    ALIVE,
    ALL_STATES,
    DONE,
    ENDED,
    ENDING,
    EXITED,
    INTERRUPTED,
    KILLED,
    PENDING,
    RUNNING,
    SHOWN,
    STARTING,
    STATE_ORDER,
    STOPPING,
    SWEEPING,
    TASK_STATES,
    TERMINAL,
    TIMED_OUT,
    BadTransition,
    shown_as,
)

__all__ = ["ACTIVE", "ALIVE", "BadTransition", "DONE", "ENDED", "ENDING", "EXITED", "INTERRUPTED", "KILLED", "PENDING",
           "RUNNING", "SHOWN", "STARTING", "ALL_STATES", "STATE_ORDER", "STOPPING", "SWEEPING", "TERMINAL", "TIMED_OUT",
           "Rusage", "Stop", "Task", "TaskResult", "end_state", "exit_status", "transition"]


@dataclass
class Rusage:
    """What `wait4` reported for the task's leader (and the descendants it reaped itself)."""

    cpu_user: float
    cpu_system: float
    max_rss_bytes: int
    # Linux records the spawning process's own peak RSS into the child's at exec (exec_mmap keeps the old
    # mm's high-water mark), so a child that never grew past the daemon's peak reports the daemon's. Only a
    # figure above the daemon's peak is the task's own (exact); the others are not shown.
    max_rss_exact: bool = True

    @property
    def cpu_seconds(self) -> float:
        return self.cpu_user + self.cpu_system


@dataclass
class TaskResult:
    """How a task ended. `exit_code` follows the shell's convention: a death by signal N is 128+N
    with `signal` naming it, so the number means the same as `$?` would in bash."""

    ended_at: float  # wall clock (epoch seconds), for humans and retention
    duration: float | None  # seconds from spawn to exit (monotonic); None when never started or unknown
    exit_code: int | None = None
    signal: str | None = None
    rusage: Rusage | None = None
    note: str | None = None  # why it ended the way it did, in a few words (kill, timeout, restart)
    # done, timed_out, killed or interrupted: what the task becomes once this result is on disk. Not written
    # into the result's own record: the record's `state` says it.
    state: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Stop:
    """A stop asked of a running task: the signal its group got, when (monotonic), and the deadline after
    which whatever is left gets SIGKILL (None: no deadline while its shell runs; a graceful kill waits for it)."""

    signal: str
    asked_at: float
    deadline: float | None = None


@dataclass
class Task:
    """What was asked and where it runs. `marker` is `<id>:<nonce>`, set in the task's environment as
    HIVE_BASH_TASK so its processes can be recognised later, even after a daemon restart."""

    id: str
    cmd: str
    cwd: str
    marker: str
    seq: int  # submission order; the pending queue and `list` sort by it
    submitted_at: float  # wall clock
    timeout_secs: float | None = None
    state: str = PENDING
    pid: int | None = None  # the leader (bash); also the process group and session id
    started_at: float | None = None  # wall clock
    result: TaskResult | None = None
    kill_signal: str | None = None  # set when a kill was asked while running: the end counts as killed
    timed_out: bool = False  # set when the deadline passed: the end counts as timed_out
    stdin: str = "null"  # "null" (/dev/null), "pipe" or "tty": what `send` can write to (task_input.py)
    # stream -> [start, end, limit(, "state")]: bytes [start, end) of its file were freed, past --max-output-bytes
    # `limit` (hivebash/disk/output_limit.py), or past --max-state-bytes `limit` with "state". Replaced whole at
    # each change, so a snapshot keeps the one it saw.
    dropped: dict[str, list] | None = None
    stop_reason: str | None = None  # why the daemon itself stopped the task (the end says it: killed)
    # The handle of the MCP task a client tracks it by (common/protocol/mcp_tasks.py): in the record before the
    # `run` answer that hands it out, so `tasks/get` resolves it also after a restart. `client_cancelled`: that
    # client's `tasks/cancel` stopped it.
    client_handle: str | None = None
    client_cancelled: bool = False
    output_pruned: str | None = None  # why its output files were emptied after its end (disk/state_quota.py)
    # Runtime-only (not persisted, see RUNTIME_FIELDS): monotonic start, for live durations; the stop asked.
    started_mono: float | None = field(default=None, repr=False, compare=False)
    stop: Stop | None = field(default=None, repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        """Ended, and the end is on disk."""
        return self.state in TERMINAL

    @property
    def ended(self) -> bool:
        """Its end is decided (its record may still be being written: `ending`)."""
        return self.state in ENDED

    @property
    def shown_state(self) -> str:
        """What a record or an answer says: one of the six shown states."""
        if self.state == ENDING:
            assert self.result is not None and self.result.state is not None
            return self.result.state
        return shown_as(self.state)

    @property
    def pgid(self) -> int | None:
        """start_new_session makes the leader its own session and group: pgid == sid == pid."""
        return self.pid

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        """Rebuild a record written by `store.record_of`; unknown keys (from a newer version) are ignored."""
        names = {f.name for f in dataclasses.fields(cls)} - RUNTIME_FIELDS - {"result"}
        task = cls(**{k: v for k, v in data.items() if k in names})
        if task.state not in SHOWN:
            raise ValueError(f"state: unknown task state {task.state!r}")
        raw = data.get("result")
        if raw is not None:
            usage = raw.get("rusage")
            rnames = {f.name for f in dataclasses.fields(TaskResult)} - {"rusage", "state"}
            task.result = TaskResult(**{k: v for k, v in raw.items() if k in rnames})
            task.result.state = task.state if task.state in TERMINAL else None
            if usage is not None:
                task.result.rusage = Rusage(**usage)
        return task


def shallow_copy(task: Task) -> Task:
    """What copy.copy(task) makes (the same fields, the same values), without the pickle protocol it goes
    through: ~115 instructions at every snapshot of a task."""
    snap = Task.__new__(Task)
    snap.__dict__.update(task.__dict__)
    return snap


RUNTIME_FIELDS = frozenset({"started_mono", "stop"})  # a Task's fields that no record holds


def transition(task: Task, new_state: str, result: TaskResult | None = None) -> None:
    """Move `task` to `new_state` if states.TASK_STATES allows it. `ending` comes with the result (whose
    `state` says the end); `ending` -> that end takes none; a terminal state reached directly (a restart's
    `interrupted`) comes with its result too.

    The only place a task's state is written. The caller holds the registry's lock (registry.py), which
    notifies waiters; this function only guards the edge.
    """
    TASK_STATES.check(task.state, new_state, who=task.id)
    if new_state == ENDING or (new_state in TERMINAL and task.state != ENDING):
        if result is None:
            raise BadTransition(f"bash task {task.id}: {new_state} needs a result")
        if new_state in TERMINAL:
            result.state = new_state
        if result.state not in TERMINAL:
            raise BadTransition(f"bash task {task.id}: {new_state} needs a result saying how it ended")
        task.result = result
    elif result is not None:
        raise BadTransition(f"bash task {task.id}: {new_state} takes no result")
    elif new_state in TERMINAL and task.result is not None and task.result.state != new_state:
        raise BadTransition(f"bash task {task.id}: ended as {task.result.state}, not {new_state}")
    task.state = new_state


def exit_status(status: int) -> tuple[int, str | None]:
    """Turn a raw wait status into (exit code, signal name): a signal death N becomes 128+N, as bash says."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        return 128 + signum, signal_name(signum)
    return os.WEXITSTATUS(status), None


def end_state(task: Task, signalled: str | None) -> tuple[str, str | None]:
    """The terminal state of a task whose leader has exited, and a note saying why.

    A kill or a timeout that we asked for decides the state whatever the exit code (the process may trap
    the signal and exit 0); otherwise it is `done`, a death by a signal we did not send included.
    """
    if task.timed_out:
        return TIMED_OUT, f"timed out after {task.timeout_secs:g}s"
    if task.stop_reason:
        return KILLED, f"killed: {task.stop_reason}"
    if task.kill_signal:
        return KILLED, f"killed by request ({task.kill_signal})"
    if signalled:
        return DONE, f"died of {signalled}"
    return DONE, None


def check_id(task_id: Any) -> str:
    """A task id as the naming rule allows it, or a refusal naming the field."""
    if not isinstance(task_id, str):
        raise EngineError("id: must be a string")
    try:
        check_name(task_id, "id")
    except InvalidName as exc:
        raise EngineError(str(exc)) from None
    return task_id
