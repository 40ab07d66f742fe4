"""The `run` verb: claim an id, write the pending record, queue the task (starting it when a slot is free),
and wait inline for its end, a matching output line, or the window's end.

The registry's lock is taken twice before the wait, with the pending record written between (outside it):
once to claim and reserve the id, once to queue the task; the wait and the answer's snapshot share one more.
"""

from __future__ import annotations

import os
import time

from common.protocol.after_answer import after_answer
from common.protocol.tools import CallContext
from hivebash.answers.inline_wait import wait_for_watches
from hivebash.answers.outcomes import Outcome
from hivebash.disk.spares import Spare
from hivebash.errors import EngineError
from hivebash.tasks import task as T
from hivebash.tasks.entry import TaskEntry
from hivebash.tasks.registry import LockedTasks
from hivebash.tasks.task import Task
from hivebash.verbs.requests import RunRequest
from hivebash.verbs.rooms import Rooms

SPAWN_GRACE = 0.05  # seconds run(wait_seconds=0) waits at most for the spawn of a task given a slot
SHUT_DOWN_PENDING = "interrupted: the daemon shut down before it started"


def run(rooms: Rooms, req: RunRequest, call: CallContext) -> Outcome:
    """Submit `bash -c cmd`; wait inline up to the capped window (or until a line of its output matches
    `wait_for`); see todo_rules.py for todos. `call.client_gone()` says whether the caller hung up during the
    wait (then the result becomes a todo)."""
    if req.name is not None:
        rooms.spares.drop(req.name)
    spare = rooms.spares.take() if req.name is None else None
    task = _claim(rooms, req, spare)
    outputs = rooms.lifecycle.write_pending(task, spare)
    entry, spawning = _queue(rooms, task, outputs, waits=req.window.seconds > 0, tracked=call.client_tasks)
    if req.window.seconds <= 0:
        return Outcome(rooms.answers.view(task.id, shows=True, settle=_await_spawn if spawning else None, brief=True),
                       req.window, 0.0, notices=rooms.answers.notices, first_answer=True)
    watches = wait_for_watches(rooms.answers.sources, [entry], req.wait_for, from_start=True) if req.wait_for else []
    return rooms.answers.answer_after_wait([entry], req.window, from_run=True, client_gone=call.client_gone,
                                           watches=watches, wait_for=req.wait_for, cancel=call.cancel,
                                           progress=call.progress)


def _claim(rooms: Rooms, req: RunRequest, spare: Spare | None) -> Task:
    """The task, its id claimed and reserved under the lock (no worker can see it yet)."""
    nonce = f"{rooms.ids.getrandbits(64):016x}"
    candidate = spare.id if spare is not None else rooms.new_id()  # checked under the lock
    with rooms.registry.locked() as tasks:
        if tasks.closing:
            if spare is not None:
                rooms.spares.discard(spare)
            raise EngineError("the daemon is shutting down: no new tasks")
        task_id = _claim_id(rooms, tasks, req.name, candidate)
        task = Task(id=task_id, cmd=req.cmd, cwd=req.cwd, marker=f"{task_id}:{nonce}",
                    seq=tasks.next_seq(), submitted_at=time.time(), timeout_secs=req.timeout_secs,
                    stdin=req.stdin)
        tasks.reserve(task)
    return task


def _queue(rooms: Rooms, task: Task, outputs: tuple[int, int], waits: bool,
           tracked: bool = False) -> tuple[TaskEntry, bool]:
    """Queue the task, start it if a slot is free (its runner starts when the lock is released), decide its
    "running" todo when no inline wait follows (none when `tracked`: a client of the tasks extension will track
    it if it outlives the wait); (its entry, whether `run` waits a moment for its spawn)."""
    with rooms.registry.locked() as tasks:
        entry = tasks.add(task)
        tasks.enqueue(entry)
        if waits:
            tasks.agent.wait_inline([entry])  # before any worker can end it: see LockedTasks.recorded
        # Cancelled if the daemon shut down meanwhile.
        ended = tasks.cancel(entry, T.INTERRUPTED, SHUT_DOWN_PENDING) if tasks.closing else None
        mine = next((r for r in tasks.start_queued(rooms.lifecycle.runner_for) if r.task is task), None)
        if mine is not None:  # its worker would open them again
            mine.outputs = outputs
        if tracked or not waits:  # (most runs wait, for a client without the extension: no call for them)
            _running_todo(tasks, entry, waits, tracked)
        spawning = not waits and mine is not None
        if spawning:
            tasks.agent.expect_spawn(entry)
        spare_id = _spare_id(rooms, tasks)  # the files of a later run, made once this one's answer is sent
    if mine is None:  # a queued task's worker opens them when it starts
        for fd in outputs:
            os.close(fd)
    if spare_id is not None:
        after_answer(lambda: rooms.spares.make(spare_id))
    after_answer(rooms.todos.repair)  # todos/ removed under the daemon: made again, off every call's path
    if ended is not None:
        rooms.lifecycle.record_ends([ended])
    return entry, spawning


def _running_todo(tasks: LockedTasks, entry: TaskEntry, waits: bool, tracked: bool) -> None:
    """The "running" todo of a task no inline wait follows: at once when queued, else after a moment."""
    if tracked:
        tasks.agent.client_will_track(entry)
    if not waits and entry.task.state == T.PENDING:
        tasks.agent.todo_running(entry, queued=True)
    elif not waits:
        tasks.agent.running_todo_later(entry)


def _await_spawn(tasks: LockedTasks, task_id: str) -> None:
    """A task given a slot just now is spawned within milliseconds: answer `running` rather than `pending`."""
    tasks.agent.await_spawn(tasks.get(task_id), SPAWN_GRACE)


def _claim_id(rooms: Rooms, tasks: LockedTasks, name: str | None, candidate: str) -> str:
    """A fresh hex id (`candidate` unless taken), or `name` if valid and free (a finished task of that
    name is replaced)."""
    if name is None:
        task_id = candidate
        while tasks.taken(task_id) is not None or rooms.spares.holds(task_id):
            task_id = rooms.new_id()
        return task_id
    if rooms.spares.holds(name):  # being made as a spare right now (run dropped any made before)
        raise EngineError(f"name: {name!r} is being set up for another task this instant; run again, "
                          "or choose another name")
    old = tasks.taken(name)
    if old is not None:
        if not old.ended:
            raise EngineError(f"name: task {name!r} is still {old.shown_state}; wait for it, kill it, "
                              "or choose another name")
        tasks.forget(tasks.get(name))  # its files are replaced by this run
    return name


def _spare_id(rooms: Rooms, tasks: LockedTasks) -> str | None:
    """An id for a spare (spares.py), chosen under the lock, where `_claim_id` also looks at the spares, so a
    spare and a task never share one; None when enough spares are kept."""
    task_id = rooms.new_id()
    while tasks.taken(task_id) is not None or rooms.spares.holds(task_id):
        task_id = rooms.new_id()
    return task_id if rooms.spares.reserve(task_id) else None
