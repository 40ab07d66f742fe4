"""The `list` verb: the known tasks newest first, optionally of one state."""

from __future__ import annotations

from hivebash.tasks.snapshot import TaskSnapshot
from hivebash.verbs.requests import ListRequest
from hivebash.verbs.rooms import Rooms


def list_tasks(rooms: Rooms, req: ListRequest) -> tuple[list[TaskSnapshot], int]:
    """(views without tails, total matching) from `offset`; `state` is one of the shown states. Leftover
    processes are checked alive outside the lock, so the list marks only live ones; so is whether a task that
takes input waits for it."""
    state, limit, offset = req.state, req.limit, req.offset
    with rooms.registry.locked() as tasks:
        entries = [e for e in sorted(tasks.entries(), key=lambda e: e.task.seq, reverse=True)
                   if state is None or e.task.shown_state == state]
        page = [(tasks.snapshot(e), list(e.leftovers), e) for e in entries[offset: offset + (limit or len(entries))]]
    for view, leftovers, entry in page:
        if leftovers:
            view.leftovers = [p.pid for p in leftovers if rooms.ops.is_alive(p)]
        rooms.answers.note_asking(view, entry, False, None)  # (a running pipe or tty task: one look)
    return [view for view, _, _ in page], len(entries)
