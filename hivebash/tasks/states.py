"""A bash task's states and the one table of allowed changes (task.transition is the only writer of a state).

    pending  -> starting | ending | interrupted     (taken from the queue; cancelled; found so at a start)
    starting -> running | ending                    (spawned; it could not be)
    running  -> stopping | exited | ending | interrupted
                                 (a kill or its timeout; its shell exited; its worker failed; found so at a start)
    stopping -> sweeping | ending                   (its shell exited; its worker failed)
    exited   -> ending
    sweeping -> ending
    ending   -> done | timed_out | killed | interrupted   (its terminal record is on disk)

`stopping` keeps the signal sent and the deadline (task.Stop); `ending` is "ended, record pending": the end
and its result are decided, the terminal record is being written, and no answer says it ended before it is on
disk. A record and an answer say one of the six SHOWN states: `shown_as` maps the others onto them.
"""

from __future__ import annotations

from common.states import BadTransition, StateTable

PENDING = "pending"  # queued: waits for one of max_running slots
STARTING = "starting"  # taken from the queue: its process is being spawned
RUNNING = "running"
STOPPING = "stopping"  # a kill or its timeout signalled its group; its shell still runs
EXITED = "exited"  # its shell exited by itself: its worker looks for what it left, then records the end
SWEEPING = "sweeping"  # its shell exited after a stop: its worker stops what it left, until the deadline
ENDING = "ending"  # ended, record pending
DONE = "done"
TIMED_OUT = "timed_out"
KILLED = "killed"
INTERRUPTED = "interrupted"

TERMINAL = frozenset({DONE, TIMED_OUT, KILLED, INTERRUPTED})  # ended, and the end is on disk
ENDED = TERMINAL | {ENDING}  # its end is decided
ALIVE = frozenset({RUNNING, STOPPING})  # its shell runs: its group id may be signalled
# What records and answers say, in display and filter order (the `list` tool's enum keeps this order).
STATE_ORDER = (PENDING, RUNNING, DONE, TIMED_OUT, KILLED, INTERRUPTED)
SHOWN = frozenset(STATE_ORDER)
ACTIVE = frozenset({PENDING, RUNNING})  # of the shown states: what a restart finds unfinished
_SHOWN_AS = {STARTING: PENDING, STOPPING: RUNNING, EXITED: RUNNING, SWEEPING: RUNNING}

TASK_STATES: StateTable[str] = StateTable("bash task", {
    PENDING: {STARTING, ENDING, INTERRUPTED},
    STARTING: {RUNNING, ENDING},
    RUNNING: {STOPPING, EXITED, ENDING, INTERRUPTED},
    STOPPING: {SWEEPING, ENDING},
    EXITED: {ENDING},
    SWEEPING: {ENDING},
    ENDING: TERMINAL,
})
ALL_STATES = frozenset(TASK_STATES.edges) | TERMINAL


def shown_as(state: str) -> str:
    """The state a record or an answer says for `state` (for `ending`: see Task.shown_state)."""
    return _SHOWN_AS.get(state, state)


__all__ = ["ACTIVE", "ALIVE", "BadTransition", "DONE", "ENDED", "ENDING", "EXITED", "INTERRUPTED", "KILLED", "PENDING",
           "RUNNING", "SHOWN", "STARTING", "ALL_STATES", "STATE_ORDER", "STOPPING", "SWEEPING", "TASK_STATES",
           "TERMINAL", "TIMED_OUT", "shown_as"]
