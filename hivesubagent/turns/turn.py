"""One turn of a session: a claude process from reservation to recorded end, and its state table.

    starting -> running | ended     (spawned; or refused/failed before claude ran)
    running  -> stopping | ended    (we signalled it; or it exited by itself)
    stopping -> ended

Nothing here does I/O or takes a lock: the engine changes a turn's state only through its one guarded
transition (`TurnTable.transition_locked`), under its condition.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from common.states import StateTable
from hivesubagent.answers.shapes import WorkData, WorktreeData
from hivesubagent.places.book import Place
from hivesubagent.turns import claude

STARTING = "starting"  # the name is reserved; transcripts are being looked up/archived, claude spawned
RUNNING = "running"
STOPPING = "stopping"  # we signalled it; waiting for the exit
ENDED = "ended"  # exited, reaped, outcome decided; already out of the engine's map

TURN_STATES: StateTable[str] = StateTable("turn", {
    STARTING: {RUNNING, ENDED},
    RUNNING: {STOPPING, ENDED},
    STOPPING: {ENDED},
})


@dataclass(frozen=True)
class TurnBounds:
    """What one turn may use: dollars (claude's --max-budget-usd), model calls (claude's --max-turns) and wall
    time (the daemon's timer); None: no cap."""

    budget_usd: float | None = None
    max_turns: int | None = None
    timeout_s: float | None = None

    @property
    def timeout_minutes(self) -> float | None:
        """The time limit in minutes, as answers show it (to the thousandth)."""
        return None if self.timeout_s is None else round(self.timeout_s / 60, 3)


@dataclass(eq=False)
class Turn:
    """One running claude process: a turn of session `name`.

    The engine's condition guards every field but two: `exited` (and the signalling it allows) is guarded by
    `reap_lock`, held while the group leader is signalled or reaped, so a signal never reaches a recycled
    pgid; `stream` is written by the reader thread alone (the engine is notified after each event)."""

    name: str
    kind: str  # "start" | "continue"
    session_id: str
    transcript: Path
    model: str | None
    prompt: str
    number: int  # the session's turn number this run will be
    cost_before: float | None  # cumulative cost before this turn (from the transcript)
    bounds: TurnBounds = field(default_factory=TurnBounds)
    archived: list[Path] = field(default_factory=list)  # (start) earlier transcripts of the name it archived
    started_wall: float = field(default_factory=time.time)
    started_mono: float = field(default_factory=time.monotonic)
    state: str = STARTING  # one of the four above, written only by TurnTable.transition_locked
    spawned: claude.Spawned | None = None
    stream: claude.StreamState = field(default_factory=claude.StreamState)
    sent: dict[str, str] = field(default_factory=dict)  # signal name -> why
    reap_lock: threading.Lock = field(default_factory=threading.Lock)
    exited: bool = False  # reaped: never signal its pgid again
    outcome: claude.TurnEnd | None = None
    turn_cost: float | None = None
    total_cost: float | None = None
    ended_mono: float | None = None
    timers: list[threading.Timer] = field(default_factory=list)
    reader: threading.Thread | None = None
    reported: bool = False  # its todo is queued (after ended: a continue is never refused once the todo says done)
    client_task: bool = False  # a client of the MCP tasks extension follows it by a handle (turns/tasks.py)
    end_shown: bool = False  # an answer to the model (status, interrupt) showed its end
    delivered: bool = False  # a client's tasks/get returned its end (turns/tasks.py): that is its one notice
    todo_sent: bool = False  # its end's todo is being queued (set under the condition before the upsert)
    timed_out: bool = False  # its time limit passed: the timer sent the SIGINT
    transcript_start: int = 0  # the transcript's size when this turn began: its own lines come after
    work: WorkData | None = None  # what the turn did (turns.work.TurnWork.as_dict), read at its end; None: unknown
    stall_after_s: float | None = None  # no stream event for this long: stalled (the daemon's --stall-minutes)
    stall_reported: float | None = None  # the event time (progress.last_event_mono) of the silence last reported
    place: Place | None = None  # where it runs and its options (the turn's own); None: --workdir, claude's defaults
    worktree_stat: WorktreeData | None = None  # what its worktree holds against the base, measured at its end

    @property
    def budget_usd(self) -> float | None:
        return self.bounds.budget_usd

    @property
    def pid(self) -> int | None:
        return self.spawned.proc.pid if self.spawned else None

    def elapsed(self) -> float:
        end = self.ended_mono if self.ended_mono is not None else time.monotonic()
        return max(0.0, end - self.started_mono)
