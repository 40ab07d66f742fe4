"""A visible stall: a running turn whose claude has written no stream event for `--stall-minutes` (default 10).

Claude that waits on a hung tool, or on an API that stopped answering, looks from outside exactly like one that
works. So a timer per turn looks at the time of the stream's last event: once the silence passes the threshold,
the turn's todo is updated ("no event from claude for 12 min; last: tool Bash started 12 min ago"), again at
each further threshold of silence, and cleared when events resume; `status` says the same at any moment
(views.turn_view). Nothing is stopped unless `--stall-action interrupt` says so.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from common.config import SubagentSettings
from common.todos import Todos
from hivesubagent.answers.shapes import TurnView
from hivesubagent.turns import turn as T
from hivesubagent.turns import views
from hivesubagent.turns.table import TurnTable
from hivesubagent.turns.turn import Turn

log = logging.getLogger(__name__)


class StallWatch:
    def __init__(self, table: TurnTable, settings: SubagentSettings, todos: Todos,
                 stop: Callable[[Turn, str], None], safe_todo: Callable[[Callable[[], Any]], None]):
        self.table, self.settings, self.todos = table, settings, todos
        self.stop, self.safe_todo = stop, safe_todo

    @property
    def threshold(self) -> float | None:
        return self.settings.stall_minutes * 60 or None

    def arm(self, turn: Turn) -> None:
        """Watch a turn that just started (called outside the table's lock)."""
        if self.threshold is None:
            return
        with self.table.cond:
            turn.stall_after_s = self.threshold
        self._schedule(turn, self.threshold)

    def resumed(self, turn: Turn) -> None:
        """The reader saw an event; a reported stall is over: its todo goes (the completion todo comes later)."""
        with self.table.cond:
            if turn.stall_reported is None or turn.state == T.ENDED:
                return
            turn.stall_reported = None
            # Queued under the table's lock (the outbox only queues it): the turn cannot end in between, so
            # this clear never lands after, and erases, its completion todo.
            self.safe_todo(lambda: self.todos.clear(turn.name))
        log.info("session %s: claude writes events again", turn.name)

    def _schedule(self, turn: Turn, seconds: float) -> None:
        timer = threading.Timer(seconds, self._check, args=(turn,))
        timer.daemon = True
        with self.table.cond:
            if turn.state == T.ENDED:
                return
            turn.timers.append(timer)
        timer.start()

    def _check(self, turn: Turn) -> None:
        threshold = self.threshold or 0.0
        with self.table.cond:
            if turn.state == T.ENDED:
                return
            last = turn.stream.progress.last_event_mono
            idle = time.monotonic() - last
            report = idle >= threshold
            if report:
                turn.stall_reported = last
                # Under the lock, as resumed's clear: a notice queued after the turn ended would replace its
                # completion todo, and nothing would replace the notice.
                stall = self._report_locked(turn, views.turn_view(turn, 0))
        if report:
            log.warning("session %s: %s", turn.name, stall)
            if self.settings.stall_action == "interrupt":
                self.stop(turn, f"stalled: {stall.split(';')[0]}")
        # Again at the next threshold of this silence, or a threshold after the last event.
        self._schedule(turn, threshold - idle % threshold if report else threshold - idle)

    def _report_locked(self, turn: Turn, data: TurnView) -> str:
        """Queue the stall's todo (the outbox only queues: cheap under the table's lock); the stall line."""
        stall = data["stall"]
        assert stall is not None, "reported past the threshold, so the view says the stall"
        summary = f"subagent {turn.name}: turn {turn.number} stalled, {stall.split(';')[0]}"
        then = ("the daemon interrupts it (--stall-action interrupt)" if self.settings.stall_action == "interrupt" else
                f'nothing is stopped: status(name="{turn.name}") shows its progress, '
                f'interrupt(name="{turn.name}") stops it')
        body = f"{stall}\n{then}; this todo goes when claude writes again, and the turn's outcome replaces it."
        self.safe_todo(lambda: self.todos.upsert(turn.name, summary, body, data))
        return stall
