"""Helpers for the subagent daemon's tests: what the engine's turn table holds, read under its condition."""


def running_names(engine):
    """The names with a running turn, sorted."""
    with engine.table.cond:
        return sorted(t.name for t in engine.table.running_locked())


def wait_for_turns(engine, predicate, seconds):
    """Wait until `predicate()` holds, re-checked at every change of a turn (state, stream, todo)."""
    with engine.table.cond:
        return engine.table.wait_locked(predicate, seconds)


class Reports:
    """A client that asked for progress: what a wait reported while it went on (the transport's side is
    tests/common's)."""

    wanted = True

    def __init__(self) -> None:
        self.messages: list[str] = []

    def report(self, progress: float, total: float | None, message: str) -> None:
        self.messages.append(message)
