"""The turn table: the running turns by name, the last ended turn per name, and the one condition over them.

`cond` guards the two maps, `closed`, and every field of every Turn except `exited` (its `reap_lock`) and
`stream` (written by the turn's reader thread alone, which notifies `cond` after each event). It is held for
memory work only: no disk, no process table, no thread start. Methods that need it held end in `_locked`.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common.notices import Notices
from common.waiting import wait_for
from hivesubagent.errors import SubagentError
from hivesubagent.transcripts.sessions import Transcript
from hivesubagent.turns import turn as T
from hivesubagent.turns.turn import TURN_STATES, Turn

ENDED_KEPT = 1000  # names whose last turn's outcome the engine remembers (what a transcript cannot say)


@dataclass
class EndedTally:
    """The turns ended since the daemon started: how many of each outcome, what they cost, their tokens."""

    outcomes: Counter[str] = field(default_factory=Counter)
    cost_usd: float = 0.0
    tokens: Counter[str] = field(default_factory=Counter)  # "input" (cache reads and writes included), "output"

    def add(self, turn: Turn) -> None:
        if turn.outcome is not None:
            self.outcomes[turn.outcome.kind] += 1
        self.cost_usd += turn.turn_cost or 0.0
        progress = turn.stream.progress.view()
        self.tokens["input"] += progress["input_tokens"] or 0
        self.tokens["output"] += progress["output_tokens"] or 0


class TurnTable:
    def __init__(self, max_running: int, notices: Notices | None = None):
        self.max_running = max_running
        self.notices = notices or Notices(True)  # what the refusals may promise
        self.cond = threading.Condition()
        self.closed = False  # shutting down: no new reservation
        self._running: dict[str, Turn] = {}
        # The last ended turn per name, oldest first: its outcome as the stream said it (a budget stop, the
        # signals sent), which the transcript does not record. Memory only: after a restart the transcript
        # alone answers.
        self._ended: dict[str, Turn] = {}
        # Counts every notified change (a state, a stream event): a waiter that reports progress sees each.
        self.changes = 0
        self.ended = EndedTally()  # every turn ended since the start, for /metrics

    def changed_locked(self) -> None:
        """Something about a turn changed (its state, claude's stream, its todo): wake every waiter."""
        self.changes += 1
        self.cond.notify_all()

    def reserve(self, name: str, make: Callable[[], Turn]) -> Turn:
        """Put a new turn of `name` in the map, or refuse: shutting down, `name` running, max_running reached.
        A name is reserved before anything touches its transcripts: claude does not stop two runs of one
        session, and both would append to one transcript."""
        with self.cond:
            if self.closed:
                raise SubagentError("refused: the daemon is shutting down")
            running = self._running.get(name)
            if running is not None:
                wait = f"status(name={name!r}, wait_seconds=30) waits for its end"
                raise SubagentError(
                    f"refused: {name!r} is running (turn {running.number}, {running.elapsed():.0f}s so far); "
                    + self.notices.say(f"its todo comes when it ends, {wait}", wait)
                    + f", interrupt(name={name!r}) stops it"
                )
            if len(self._running) >= self.max_running:
                names = sorted(self._running)
                listed = ", ".join(f'"{n}"' for n in names)
                raise SubagentError(
                    f"refused: max_running={self.max_running} sessions are already running "
                    f"({', '.join(names)}). Wait for one to end with status(names=[{listed}], "
                    "wait_seconds=30), then start again; or interrupt one of them"
                )
            turn = make()
            self._running[name] = turn
            return turn

    def release(self, turn: Turn) -> None:
        """Free a reservation whose claude never ran (a refusal or a failed spawn): nothing to report."""
        with self.cond:
            turn.reported = True
            self.transition_locked(turn, T.ENDED)

    def transition_locked(self, turn: Turn, new: str) -> None:
        """The one place a turn changes state; wakes every waiter. An ended turn leaves the running map."""
        turn.state = TURN_STATES.check(turn.state, new, turn.name)
        if new == T.ENDED:
            turn.ended_mono = time.monotonic()
            if self._running.get(turn.name) is turn:
                del self._running[turn.name]
        self.changed_locked()

    def remember_ended_locked(self, turn: Turn) -> None:
        self.ended.add(turn)
        self._ended.pop(turn.name, None)
        self._ended[turn.name] = turn
        while len(self._ended) > ENDED_KEPT:
            self._ended.pop(next(iter(self._ended)))

    def running_locked(self, name: str | None = None) -> Any:
        """The running turn of `name` (None when it has none), or every running turn when `name` is None."""
        return list(self._running.values()) if name is None else self._running.get(name)

    def last_ended_locked(self, name: str) -> Turn | None:
        """The last turn of `name` that this process ended, if it remembers one."""
        return self._ended.get(name)

    def close(self) -> list[Turn]:
        """Refuse new reservations from now on; the turns running now."""
        with self.cond:
            self.closed = True
            return list(self._running.values())

    def ended_turn_of(self, t: Transcript) -> Turn | None:
        """This engine's own record of the transcript's last turn, if it ran it and nothing ran since."""
        with self.cond:
            turn = self._ended.get(t.name or "")
        if turn is None or turn.session_id != t.session_id or turn.number != t.turns or turn.outcome is None:
            return None
        return turn

    def wait_locked(self, predicate: Callable[[], Any], seconds: float) -> bool:
        return wait_for(self.cond, predicate, seconds)
