"""The bash engine: builds the rooms once and hands each tool call to its verb.

The rooms are its folders, top floor first (docs/design.md draws them): verbs/ (a module a request), answers/
(views and inline waits), processes/ (spawn to reap), disk/ (a task's files), tasks/ (the table and its lock:
`with registry.locked() as tasks:`), stdin/, output_views/.
"""

from __future__ import annotations

import dataclasses
import os
import random
import secrets
from pathlib import Path
from typing import Any

from common.config import BashSettings
from common.notices import Notices
from common.protocol.tools import CallContext
from common.todos import NoTodos, Todos
from common.waiting import WAIT_CAP_SECONDS, Doorbell, WaitSlots
from hivebash.answers.answering import Answers
from hivebash.answers.outcomes import KillOutcome, ManyOutcome, Outcome
from hivebash.disk import state_quota
from hivebash.disk.records import RecordWriter
from hivebash.disk.spares import SpareFiles
from hivebash.disk.store import TaskStore
from hivebash.errors import EngineError, UnknownTask
from hivebash.processes.lifecycle import Lifecycle
from hivebash.processes.ops import LinuxTaskProcessOps, TaskProcessOps
from hivebash.processes.reaper import OrphanReaper
from hivebash.processes.runner import Launcher
from hivebash.processes.workers import WorkerPool
from hivebash.tasks.registry import TaskRegistry
from hivebash.tasks.snapshot import TaskSnapshot
from hivebash.tasks.todo_rules import TodoCalls
from hivebash.verbs import kill as kill_verb
from hivebash.verbs import listing, recovery, requests, retention
from hivebash.verbs import run as run_verb
from hivebash.verbs import shutdown as shutdown_verb
from hivebash.verbs import status as status_verb
from hivebash.verbs.requests import MAX_CMD_BYTES, MAX_IDS
from hivebash.verbs.rooms import Rooms
from hivebash.verbs.send import Sender, SendOutcome

__all__ = ["MAX_CMD_BYTES", "MAX_IDS", "Engine", "EngineError", "UnknownTask"]


class Engine:
    """Bash tasks: submit, observe, stop, list. Thread-safe; one instance per daemon."""

    def __init__(self, settings: BashSettings, todos: Todos | None = None, *, subreaper: bool = False,
                 wait_cap: float = WAIT_CAP_SECONDS, env: dict[str, str] | None = None,
                 ops: TaskProcessOps | None = None):
        """`ops`: every process operation of the engine and its workers (tests pass a recording fake)."""
        self.settings = settings
        self.store = TaskStore(settings.state_dir, fsync=settings.fsync, fsync_window=settings.fsync_window,
                               shared=settings.share_group is not None)
        records = RecordWriter(self.store)
        ops = ops if ops is not None else LinuxTaskProcessOps()
        wake = Doorbell()
        reaper = OrphanReaper(ops, on_watch=wake.ring)
        self.todo_calls = TodoCalls(todos or NoTodos())
        registry = TaskRegistry(self.store, ops, self.todo_calls, settings.max_running)
        self.notices = Notices.for_socket(settings.agent_socket)  # else no todo reaches the agent: answers say so
        self.slots = WaitSlots(settings.max_inline_waits)
        self.spares = SpareFiles(self.store)
        self.rooms = Rooms(
            settings=settings, store=self.store, records=records, registry=registry,
            lifecycle=Lifecycle(settings, registry, records, reaper, Launcher(env), WorkerPool("bash-worker"), wake,
                                subreaper, ops),
            answers=Answers(registry, self.store, ops, self.slots, self.notices, settings.tail_bytes),
            spares=self.spares, ops=ops, reaper=reaper, wake=wake, subreaper=subreaper, wait_cap=wait_cap,
            default_cwd=os.getcwd(), ids=random.Random(secrets.randbits(128)), todos=self.todo_calls.todos)
        self.registry = registry
        self.sender = Sender(registry, self.rooms.answers)
        self.limits = requests.Limits(self.rooms.default_cwd, wait_cap)
        self.housekeeper = retention.Housekeeper(wake, reaper, subreaper, self.rooms.our_markers,
                                                 self._housekeep,
                                                 lambda: registry.closing)

    def _housekeep(self, by_age: bool) -> None:
        retention.prune(self.rooms, by_age)
        state_quota.enforce(self.rooms, by_age)
        if by_age:  # the full pass, every 30 s
            self.rooms.lifecycle.retry_unsaved()

    @property
    def todos(self) -> Todos:
        return self.todo_calls.todos

    @property
    def default_cwd(self) -> str:
        return self.rooms.default_cwd

    @property
    def state_dir(self) -> Path:
        return self.store.state_dir

    @property
    def closing(self) -> bool:
        return self.registry.closing

    def open(self) -> None:
        """Load the records, turn tasks that were pending/running into `interrupted` (recovery.py), apply
        retention, and start the housekeeping thread."""
        recovery.recover(self.rooms)
        retention.prune(self.rooms)
        self.housekeeper.start()
        self.rooms.answers.inputs.start()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop everything this daemon started (shutdown.py), then its output guard, spares, flusher and
        housekeeper."""
        shutdown_verb.shut_down(self.rooms, timeout)
        self.rooms.answers.inputs.close()
        self.rooms.lifecycle.guard.close()
        self.todo_calls.run_held()  # completion todos held for a client's poll go out now
        self.spares.close()
        self.store.flusher.close()
        self.rooms.wake.ring()

    # The verbs, a checked request each (verbs/requests.py). Keywords are the tool's arguments, or the call's
    # context (`call`, or its parts: client_gone, cancel, progress, operator, for in-process callers).

    def run(self, cmd: str | None = None, **args: Any) -> Outcome:
        """Submit `bash -c cmd` and wait inline (run.py)."""
        call, rest = _call_of(args)
        return run_verb.run(self.rooms, requests.check_run(_with(rest, "cmd", cmd), self.limits), call)

    def status(self, task_id: str | None = None, **args: Any) -> Outcome | ManyOutcome:
        """One task or several (`ids`; `all`: wait for every one), with an optional inline wait (status.py)."""
        call, rest = _call_of(args)
        return status_verb.status(self.rooms, requests.check_status(_with(rest, "id", task_id), self.limits), call)

    def send(self, task_id: str | None = None, **args: Any) -> SendOutcome:
        """Write to a running task's input, then wait a moment for what it prints (send.py). An operator's send
        clears no todo and moves no new_only cursor."""
        call, rest = _call_of(args)
        return self.sender.send(requests.check_send(_with(rest, "id", task_id), self.limits), call)

    def kill(self, task_id: str | None = None, **args: Any) -> KillOutcome:
        """Cancel a pending task, signal a running one's group (then wait up to `wait_seconds`, default 2, for
        its end), or stop a finished task's leftover processes (kill.py)."""
        _, rest = _call_of(args)
        return kill_verb.kill(self.rooms, requests.check_kill(_with(rest, "id", task_id), self.limits))

    def list(self, **args: Any) -> tuple[list[TaskSnapshot], int]:
        """Tasks newest first, optionally of one state, from `offset`; (views without tails, total matching)."""
        _, rest = _call_of(args)
        return listing.list_tasks(self.rooms, requests.check_list(rest))


_CALL_PARTS = ("client_gone", "cancel", "progress", "operator")


def _call_of(args: dict[str, Any]) -> tuple[CallContext, dict[str, Any]]:
    """The call's context (given whole as `call`, or as its parts) and the request's own arguments."""
    call = args.pop("call", None)
    if call is not None and args.keys().isdisjoint(_CALL_PARTS):  # the tools' way: one call per request
        return call, args
    parts = {key: args.pop(key) for key in _CALL_PARTS if key in args and args[key] is not None}
    if call is None:
        call = CallContext(**parts)
    elif parts:
        call = dataclasses.replace(call, **parts)
    return call, args


def _with(args: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """`args` with the positional first argument, when one was given."""
    return args if value is None else {key: value, **args}
