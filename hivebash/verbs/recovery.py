"""The recovery verb: what a start does with the tasks on disk. Those a previous daemon left `pending` or
`running` get their processes stopped and are recorded `interrupted`, with one todo each (held for a while
for one an MCP client tracks: its next poll delivers the end instead).

A previous daemon's processes are found by their marker (a random nonce per task, in their environment) and a
start time not before the task was submitted, so a recycled pid is never taken for a task's process.
"""

from __future__ import annotations

import logging
import os
import signal
import time

from common.process_seam import ProcInfo
from common.protocol.mcp_tasks import poll_interval_ms
from hivebash.disk.end_room import output_sizes
from hivebash.disk.output_limit import settle_dropped
from hivebash.processes.ops import TaskProcessOps
from hivebash.processes.task_processes import stop_until_none_found
from hivebash.tasks import task as T
from hivebash.tasks.record import record_of
from hivebash.tasks.task import Task, TaskResult
from hivebash.verbs.rooms import Rooms

log = logging.getLogger(__name__)
LONGEST_POLL = poll_interval_ms(float("inf")) / 1000  # seconds: the longest interval a client is told to poll at


def recover(rooms: Rooms) -> None:
    """Load every record into the registry, and interrupt the stale tasks (nothing else runs yet)."""
    loaded = rooms.store.load_all()
    stale = interrupt_stale(loaded, rooms.settings.kill_grace, rooms.ops)
    for t in stale:
        _settle_output(rooms, t)
    for t in loaded:
        rooms.records.own(t.id, t)
    unsaved = {t.id: rooms.lifecycle.persist(t, record_of(t), terminal=True) for t in stale}  # a full disk: said
    with rooms.registry.locked() as tasks:
        for t in loaded:
            entry = tasks.add(t)
            if t.id in unsaved:
                entry.unsaved = unsaved[t.id]
                if t.client_handle is not None:  # its client polls again once we answer: its poll delivers the end
                    tasks.agent.client_polled(entry, LONGEST_POLL)
                tasks.agent.todo_completion(entry)
            elif t.terminal:
                tasks.agent.may_hold_todo(entry)


def _settle_output(rooms: Rooms, task: Task) -> None:
    """A stale task's files as its record will say them: its ranges end where the holes do, and what its
    processes wrote past the limit since the last look is cut as at a task's end (its record is written next)."""
    paths = {"stdout": rooms.store.file(task.id, "out"), "stderr": rooms.store.file(task.id, "err")}
    try:
        settle_dropped(task, paths)
        rooms.lifecycle.guard.finish(task, output_sizes(paths), lambda: paths)
    except OSError as exc:
        log.warning("task %s: its output files could not be settled: %s", task.id, exc)


def interrupt_stale(tasks: list[Task], kill_grace: float, ops: TaskProcessOps) -> list[Task]:
    """SIGKILL the live processes of the tasks found active, move those tasks to `interrupted` and return them
    (the caller writes their records)."""
    stale = [t for t in tasks if t.state in T.ACTIVE]
    alive = _stop_stale_processes(stale, kill_grace, ops) if stale else set()
    now = time.time()
    for t in stale:
        result = TaskResult(ended_at=now, duration=None, note=_note(t, t.marker in alive))
        T.transition(t, T.INTERRUPTED, result)  # pending | running -> interrupted
    return stale


def _note(task: Task, alive: bool) -> str:
    """What is known, and only that: the state its last saved record holds (a later one, even an end, may not
    have been saved: a full disk), and whether processes of it were still running."""
    saved = task.shown_state
    if alive:
        return (f"interrupted: the daemon stopped while the task was running (its last saved record said {saved}); "
                "its processes were stopped at the restart")
    if saved == T.RUNNING:
        return "interrupted: the daemon stopped while the task was running (its end, if it came, was not saved)"
    return ("interrupted: the daemon stopped while the task was pending, as last saved (it may have run since; "
            "no end of it was saved)")


def _stop_stale_processes(stale: list[Task], kill_grace: float, ops: TaskProcessOps) -> set[str]:
    """Stop the processes of `stale` as by a forced kill; return the markers of the tasks that had any."""
    by_marker = {t.marker: t for t in stale}

    def victims() -> list[ProcInfo]:
        found = ops.find({m: None for m in by_marker}, descendants_only=False)
        return [p for m, procs in found.items() for p in procs if p.create_time >= by_marker[m].submitted_at - 1.0]

    def stop(procs: list[ProcInfo]) -> None:
        # The groups first: a group's SIGKILL reaches the child a shell is forking at that moment, which a
        # signal by pid misses (the pids come from a scan of the machine that takes milliseconds, and a child
        # in the middle of its exec shows no environment, so no marker, to it). Each group id was read from
        # a live process of the task during that scan; our own group is never one of them.
        for pgid in {p.pgid for p in procs if p.pgid is not None} - {os.getpgrp()}:
            ops.signal_group(pgid, signal.SIGKILL)
        ops.stop(procs, force=True, deadline=time.monotonic() + kill_grace)

    stopped = stop_until_none_found(victims, stop)
    if stopped:
        log.warning("stopped %d leftover process(es) of interrupted tasks", len(stopped))
    return {p.marker for p in stopped}
