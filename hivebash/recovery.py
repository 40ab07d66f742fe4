"""The recovery verb: what a start does with the tasks on disk. Those a previous daemon left `pending` or
`running` get their processes stopped and are recorded `interrupted`, with one todo each.

A previous daemon's processes are found by their marker (a random nonce per task, in their environment) and a
start time not before the task was submitted, so a recycled pid is never taken for a task's process.
"""

from __future__ import annotations

import logging
import time

from . import task as T
from .process_ops import ProcessOps
from .records import record_of
from .rooms import Rooms
from .task import Task, TaskResult

log = logging.getLogger(__name__)


def recover(rooms: Rooms) -> None:
    """Load every record into the registry, and interrupt the stale tasks (nothing else runs yet)."""
    loaded = rooms.store.load_all()
    stale = interrupt_stale(loaded, rooms.settings.kill_grace, rooms.ops)
    for t in loaded:
        rooms.records.own(t.id, t)
    for t in stale:
        rooms.records.save_now(t.id, t, record_of(t))
    stale_ids = {t.id for t in stale}
    with rooms.registry.locked() as tasks:
        for t in loaded:
            entry = tasks.add(t)
            if t.id in stale_ids:
                tasks.agent.todo_completion(entry)
            elif t.terminal:
                tasks.agent.may_hold_todo(entry)


def interrupt_stale(tasks: list[Task], kill_grace: float, ops: ProcessOps) -> list[Task]:
    """SIGKILL the live processes of the tasks found active, move those tasks to `interrupted` and return them
    (the caller writes their records)."""
    stale = [t for t in tasks if t.state in T.ACTIVE]
    alive = _stop_stale_processes(stale, kill_grace, ops) if stale else set()
    now = time.time()
    for t in stale:
        # A pending record whose processes were found alive ran: its running record was still queued.
        ran = t.pid is not None or t.marker in alive
        note = "interrupted: the daemon stopped while the task was " + ("running" if ran else "pending")
        T.transition(t, T.INTERRUPTED, TaskResult(ended_at=now, duration=None, note=note))  # pending | running -> interrupted
    return stale


def _stop_stale_processes(stale: list[Task], kill_grace: float, ops: ProcessOps) -> set[str]:
    """Stop the processes of `stale` as by a forced kill; return the markers of the tasks that had any."""
    found = ops.find({t.marker: None for t in stale}, descendants_only=False)
    by_marker = {t.marker: t for t in stale}
    victims = [p for m, procs in found.items() for p in procs if p.create_time >= by_marker[m].submitted_at - 1.0]
    if victims:
        log.warning("stopping %d leftover process(es) of interrupted tasks", len(victims))
        ops.stop(victims, force=True, deadline=time.monotonic() + kill_grace)
    return {p.marker for p in victims}
