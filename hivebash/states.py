"""A bash task's states and the one table of allowed changes (task.transition is the only writer of a state).

    pending  -> running | killed            (kill before start cancels it)
    running  -> done | timed_out | killed
    pending, running -> interrupted          (found so on disk when the daemon starts, or at shutdown)
"""

from __future__ import annotations

from common.states import BadTransition, StateTable

PENDING = "pending"
RUNNING = "running"
DONE = "done"
TIMED_OUT = "timed_out"
KILLED = "killed"
INTERRUPTED = "interrupted"

STATES = frozenset({PENDING, RUNNING, DONE, TIMED_OUT, KILLED, INTERRUPTED})
ACTIVE = frozenset({PENDING, RUNNING})
TERMINAL = STATES - ACTIVE
# Display and filter order (the `list` tool's enum keeps this order).
STATE_ORDER = (PENDING, RUNNING, DONE, TIMED_OUT, KILLED, INTERRUPTED)

TASK_STATES: StateTable[str] = StateTable("bash task", {
    PENDING: {RUNNING, KILLED, INTERRUPTED},
    RUNNING: {DONE, TIMED_OUT, KILLED, INTERRUPTED},
})

__all__ = ["ACTIVE", "BadTransition", "DONE", "INTERRUPTED", "KILLED", "PENDING", "RUNNING", "STATES", "STATE_ORDER",
           "TASK_STATES", "TERMINAL", "TIMED_OUT"]
