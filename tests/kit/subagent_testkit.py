"""Helpers for the subagent daemon's tests: what the engine's turn table holds, read under its condition."""


def running_names(engine):
    """The names with a running turn, sorted."""
    with engine.table.cond:
        return sorted(t.name for t in engine.table.running_locked())


def wait_for_turns(engine, predicate, seconds):
    """Wait until `predicate()` holds, re-checked at every change of a turn (state, stream, todo)."""
    with engine.table.cond:
        return engine.table.wait_locked(predicate, seconds)
