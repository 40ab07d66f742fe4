"""The MCP tasks a client tracks bash tasks by (common/protocol/mcp_tasks.py): handing out a task's handle, finding
its entry again, a client's poll and its cancel. What the answers say is hivebash/tools/client_tasks.py's.

A handle is `<task id>-<secret>`; it is written into the task's record before the `run` answer that carries it
goes out, so a `tasks/get` resolves from then on, after a restart too. An unknown id, a pruned task and a wrong
secret are one answer (UnknownHandle): the handle tells nobody which tasks exist.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from common.protocol.mcp_tasks import UnknownHandle, handle_prefix, new_handle, poll_interval_ms, same_handle
from hivebash.errors import EngineError
from hivebash.tasks import task as T
from hivebash.tasks.entry import TaskEntry
from hivebash.tasks.record import record_of
from hivebash.tasks.registry import LockedTasks
from hivebash.verbs.rooms import Rooms

RECORD_GRACE = 5.0  # seconds a poll waits at most for a just-ended task's record (as status does)
CANCELLED_PENDING = "cancelled by the client before it started"


def track(rooms: Rooms, task_id: str) -> str | None:
    """A new handle for a task still running, in its record on disk when this returns; None when the task has
    ended meanwhile or its record cannot be written (the call then answers as it would without the extension)."""
    handle = new_handle(task_id)
    with rooms.registry.locked() as tasks:
        task = tasks.get(task_id).task
        if task.ended:
            return None
        task.client_handle = handle
        record = record_of(task)
    if rooms.lifecycle.persist(task, record) is not None:
        with rooms.registry.locked():
            if task.client_handle == handle:
                task.client_handle = None
        return None
    with rooms.registry.locked():
        # Its end may have been recorded while this write was on its way (the end's record holds the handle):
        # written again, so the last record on disk is the end, not this running one.
        again = record_of(task) if task.ended else None
    if again is not None:
        rooms.lifecycle.persist(task, again)
    return handle


def entry_of(tasks: LockedTasks, handle: str) -> TaskEntry:
    """The entry whose task has this handle (under the lock), else UnknownHandle."""
    task_id = handle_prefix(handle)
    if task_id is None:
        raise UnknownHandle(handle)
    try:
        entry = tasks.get(task_id)
    except EngineError:  # no such task, or not an id at all (UnknownTask is one)
        raise UnknownHandle(handle) from None
    if not same_handle(entry.task.client_handle, handle):
        raise UnknownHandle(handle)
    return entry


@dataclass(frozen=True)
class Poll:
    """What a client's poll found: the entry, and either the end it delivers (`ended`, `seen_before`: the model
    had been shown it already) or the interval to poll again in."""

    entry: TaskEntry
    ended: bool
    seen_before: bool = False
    interval_ms: int = 0


def poll(rooms: Rooms, handle: str) -> Poll:
    """A client's `tasks/get`: an end it returns counts as delivered (the todo goes, as after a `status`)."""
    with rooms.registry.locked() as tasks:
        entry = entry_of(tasks, handle)
        task = entry.task
        tasks.wait(lambda: task.state != T.ENDING, RECORD_GRACE)  # an end is told once its record is on disk
        if task.ended:
            return Poll(entry, True, tasks.agent.client_delivered(entry))
        interval = poll_interval_ms(time.time() - task.submitted_at)
        tasks.agent.client_polled(entry, interval / 1000)
        return Poll(entry, False, interval_ms=interval)


def cancel(rooms: Rooms, handle: str) -> None:
    """A client's `tasks/cancel`: as `kill` would, SIGINT to the task's group, then SIGKILL after --kill-grace if
    it still runs (a pending task is cancelled before it starts). At once, and only the first time."""
    ended = None
    with rooms.registry.locked() as tasks:
        entry = entry_of(tasks, handle)
        task = entry.task
        if task.ended or task.client_cancelled:
            return
        task.client_cancelled = True
        if task.state == T.PENDING:
            ended = tasks.cancel(entry, T.KILLED, CANCELLED_PENDING)
        else:
            tasks.request_stop(entry, "SIGINT")
    if ended is not None:
        rooms.lifecycle.record_ends([ended])
        return
    timer = threading.Timer(rooms.settings.kill_grace, _force, (rooms, entry))
    timer.daemon = True
    timer.start()


def _force(rooms: Rooms, entry: TaskEntry) -> None:
    with rooms.registry.locked() as tasks:
        if tasks.current(entry.task) is entry and not entry.task.ended:
            tasks.request_stop(entry, "SIGKILL")
