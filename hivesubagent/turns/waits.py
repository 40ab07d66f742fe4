"""`status` waits: until the first (or, with `all`, the last) of some running turns ends, or the capped window
closes; and interrupt's wait for the turn it signalled (`wait_stopped`).

A turn's end wakes the wait through the table's condition (no polling), as does every event of claude's stream
(`TurnTable.changed_locked`, which counts them). A wait takes one of the daemon's inline-wait slots
(`WaitSlots.held`, the rule the bash daemon's waits share); with every slot taken it answers at once, saying so.
The wait is `common.protocol.call_progress.paced_wait`: a client that asked for progress gets the running turns' steps,
latest tool and tokens as they change (at most one a second), and a cancelled call ends the wait at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from common.humanize import one_line
from common.protocol.call_progress import NO_PROGRESS, Cancellation, ProgressReporter, paced_wait
from common.waiting import WaitSlots, WaitWindow
from hivesubagent.answers.shapes import StopWait, WaitFacts
from hivesubagent.turns import turn as T
from hivesubagent.turns.table import TurnTable
from hivesubagent.turns.turn import Turn

PROGRESS_CHARS = 199  # one progress message: a line a person reads at a glance


@dataclass(frozen=True)
class WaitOutcome:
    """How a `status` wait went: its window, how long it waited, and which turns ended meanwhile."""

    window: WaitWindow
    waited: float
    skipped: bool  # every wait slot was taken: answered at once
    want_all: bool
    ended: tuple[str, ...]  # names whose turn ended during the wait

    def as_dict(self) -> WaitFacts:
        return {"asked": self.window.asked, "seconds": self.window.seconds, "capped": self.window.capped,
                "waited": round(self.waited, 3), "skipped": self.skipped, "all": self.want_all,
                "ended": list(self.ended)}


def wait_turns(table: TurnTable, turns: list[Turn], want_all: bool, window: WaitWindow, slots: WaitSlots,
               progress: ProgressReporter = NO_PROGRESS, cancel: Cancellation | None = None,
               clock: Callable[[], float] = time.monotonic) -> WaitOutcome:
    """Wait until one of `turns` (every one with `want_all`) has ended, the call is cancelled, or `window` passes."""
    start = clock()

    def done() -> bool:
        ended = sum(t.state == T.ENDED for t in turns)
        return ended == len(turns) if want_all else ended > 0

    skipped = False
    if turns and window.seconds > 0:
        with slots.held() as got:
            skipped = not got
            if got:
                paced_wait(table.cond, done, window.seconds, progress, cancel or Cancellation(),
                           news=lambda: table.changes, message=lambda waited: progress_message(turns, waited),
                           clock=clock)
    with table.cond:
        ended = tuple(t.name for t in turns if t.state == T.ENDED)
    return WaitOutcome(window, clock() - start, skipped, want_all, ended)


def wait_stopped(table: TurnTable, turn: Turn, seconds: float, slots: WaitSlots, kill_grace: float,
                 clock: Callable[[], float] = time.monotonic) -> StopWait:
    """interrupt's wait: until the signalled `turn` ends or `seconds` pass, in an inline-wait slot; with every
    slot taken, none (`skipped`: the answer comes at once). `kill_grace` is kept while a SIGKILL is still due."""
    start = clock()
    with slots.held() as got, table.cond:
        if got:
            table.wait_locked(lambda: turn.state == T.ENDED, seconds)
        due = None if "SIGKILL" in turn.sent else kill_grace
    return {"seconds": seconds, "waited": round(clock() - start, 3), "skipped": not got, "kill_grace": due}


def progress_message(turns: list[Turn], waited: float) -> str:
    """One line: each turn's steps, its latest tool and tokens so far, or that it ended."""
    parts = []
    for turn in turns:
        if turn.state == T.ENDED:
            parts.append(f"{turn.name}: ended")
            continue
        p = turn.stream.progress.view()
        part = f"{turn.name}: {p['steps']} step(s)"
        if p["latest_tool"]:
            part += f", {p['latest_tool']}"
        if p["input_tokens"] is not None:
            part += f", {p['input_tokens'] + (p['output_tokens'] or 0)} tokens"
        parts.append(part)
    return one_line(f"waited {waited:.0f}s · " + " · ".join(parts), PROGRESS_CHARS)
