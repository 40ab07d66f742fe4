"""`status` waits: until the first (or, with `all`, the last) of some running turns ends, or the capped window
closes.

A turn's end wakes the wait through the table's condition (no polling), as does every event of claude's stream
(`TurnTable.changed_locked`). A wait takes one of the daemon's inline-wait slots (`WaitSlots.held`, the rule the
bash daemon's waits share); with every slot taken it answers at once, saying so.

Progress while waiting: `wait_turns(report=...)` calls `report` outside the lock after each change, with the
views of the turns still running (steps, the latest tool, tokens so far): the seam through which a streamed
answer reports progress (issue 28).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from common.waiting import WaitSlots, WaitWindow, wait_for

from hivesubagent.turn import Turn, TurnState
from hivesubagent.turns import TurnTable

Report = Callable[[list[dict[str, Any]]], None]


@dataclass(frozen=True)
class WaitOutcome:
    """How a `status` wait went: its window, how long it waited, and which turns ended meanwhile."""

    window: WaitWindow
    waited: float
    skipped: bool  # every wait slot was taken: answered at once
    want_all: bool
    ended: tuple[str, ...]  # names whose turn ended during the wait

    def as_dict(self) -> dict[str, Any]:
        return {"asked": self.window.asked, "seconds": self.window.seconds, "capped": self.window.capped,
                "waited": round(self.waited, 3), "skipped": self.skipped, "all": self.want_all, "ended": list(self.ended)}


def wait_turns(table: TurnTable, turns: list[Turn], want_all: bool, window: WaitWindow, slots: WaitSlots,
               view: Callable[[Turn], dict[str, Any]], report: Report | None = None,
               clock: Callable[[], float] = time.monotonic) -> WaitOutcome:
    """Wait until one of `turns` (every one with `want_all`) has ended, or `window` passes."""
    start = clock()
    deadline = start + window.seconds

    def done() -> bool:
        ended = sum(t.state is TurnState.ENDED for t in turns)
        return ended == len(turns) if want_all else ended > 0

    skipped = False
    if turns and window.seconds > 0:
        with slots.held() as got:
            skipped = not got
            if got:
                _wait(table, turns, done, deadline, view, report, clock)
    with table.cond:
        ended = tuple(t.name for t in turns if t.state is TurnState.ENDED)
    return WaitOutcome(window, clock() - start, skipped, want_all, ended)


def _wait(table: TurnTable, turns: list[Turn], done: Callable[[], bool], deadline: float,
          view: Callable[[Turn], dict[str, Any]], report: Report | None, clock: Callable[[], float]) -> None:
    while True:
        with table.cond:
            seen = table.changes
            wait_for(table.cond, lambda: done() or (report is not None and table.changes != seen), deadline - clock(), clock)
            if done() or clock() >= deadline:
                return
            running = [view(t) for t in turns if t.state is not TurnState.ENDED]
        if report is not None:
            report(running)
