"""The `list` verb: the known tasks newest first, optionally of one state."""

from __future__ import annotations

from .arguments import check_list
from .rooms import Rooms
from .views import TaskView


def list_tasks(rooms: Rooms, state: str | None = None, limit: int | None = None) -> tuple[list[TaskView], int]:
    """(views without tails, total matching); `state` is one of the shown states."""
    check_list(state, limit)
    with rooms.registry.locked() as tasks:
        entries = [e for e in sorted(tasks.entries(), key=lambda e: e.task.seq, reverse=True)
                   if state is None or e.task.shown_state == state]
        return [tasks.snapshot(e) for e in entries[: limit or len(entries)]], len(entries)
