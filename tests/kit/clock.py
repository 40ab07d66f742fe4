"""One fake monotonic clock for the code that takes its clock as an argument (waiting.wait_for,
mcp_sessions.SessionTable, ...): time passes only when the test says so, so no test sleeps to see it pass."""

from __future__ import annotations


class FakeClock:
    """Callable like time.monotonic; `advance(s)` (or setting `now`) moves it."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
