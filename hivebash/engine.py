"""The bash engine: builds the rooms once and hands each tool call to its verb.

The rooms are its folders, top floor first (docs/design.md draws them): verbs/ (a module a request), answers/
(views and inline waits), processes/ (spawn to reap), disk/ (a task's files), tasks/ (the table and its lock:
`with registry.locked() as tasks:`), stdin/, output_views/.
"""

from __future__ import annotations

import os
import random
import secrets
from collections.abc import Callable
from pathlib import Path

from common.config import BashSettings
from common.notices import Notices
from common.protocol.call_progress import NO_PROGRESS, Cancellation, ProgressReporter
from common.protocol.tools import never_gone
from common.todos import NoTodos, Todos
from common.waiting import WAIT_CAP_SECONDS, Doorbell, WaitSlots
from hivebash import output_views as ov
from hivebash.answers.answering import Answers
from hivebash.answers.outcomes import KillOutcome, ManyOutcome, Outcome
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
from hivebash.verbs import listing, recovery, retention
from hivebash.verbs import run as run_verb
from hivebash.verbs import shutdown as shutdown_verb
from hivebash.verbs import status as status_verb
from hivebash.verbs.arguments import MAX_CMD_BYTES, MAX_IDS
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
        self.sender = Sender(registry, self.rooms.answers, self.slots, wait_cap)
        self.housekeeper = retention.Housekeeper(wake, reaper, subreaper, self.rooms.our_markers,
                                                 self._housekeep,
                                                 lambda: registry.closing)

    def _housekeep(self, by_age: bool) -> None:
        retention.prune(self.rooms, by_age)
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

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop everything this daemon started (shutdown.py), then its output guard, spares, flusher and
        housekeeper."""
        shutdown_verb.shut_down(self.rooms, timeout)
        self.rooms.lifecycle.guard.close()
        self.todo_calls.flush()
        self.spares.close()
        self.store.flusher.close()
        self.rooms.wake.ring()

    def run(self, cmd: str, timeout_secs: float | None = None, wait_seconds: float | None = None,
            name: str | None = None, cwd: str | None = None, client_gone: Callable[[], bool] = never_gone,
            wait_for: str | None = None, stdin: str | None = None, cancel: Cancellation | None = None,
            progress: ProgressReporter = NO_PROGRESS) -> Outcome:
        """Submit `bash -c cmd` (run.py). `stdin`: "null", "pipe" or "tty" (task_input.py); `cancel` and
        `progress`: the call's (common/protocol/call_progress.py)."""
        return run_verb.run(self.rooms, cmd, timeout_secs, wait_seconds, name, cwd, client_gone, wait_for, stdin,
                            cancel, progress)

    def status(self, task_id: str | None = None, wait_seconds: float | None = None,
               client_gone: Callable[[], bool] = never_gone, *, ids: list[str] | None = None,
               wait_for: str | None = None, view: ov.ViewRequest | None = None,
               operator: bool = False, cancel: Cancellation | None = None,
               progress: ProgressReporter = NO_PROGRESS, every: bool = False) -> Outcome | ManyOutcome:
        """One task or several (`every`: wait for all of them), with an optional inline wait (status.py)."""
        return status_verb.status(self.rooms, task_id, wait_seconds, client_gone, ids=ids, wait_for=wait_for,
                                  view=view, operator=operator, cancel=cancel, progress=progress, every=every)

    def send(self, task_id: str, text: str | None = None, keys: list[str] | None = None, enter: bool | None = None,
             eof: bool | None = None, wait_seconds: float | None = None, wait_for: str | None = None,
             client_gone: Callable[[], bool] = never_gone, operator: bool = False, cancel: Cancellation | None = None,
             progress: ProgressReporter = NO_PROGRESS) -> SendOutcome:
        """Write to a running task's input, then wait a moment for what it prints (send.py). An operator's send
        clears no todo and moves no new_only cursor."""
        return self.sender.send(task_id, text, keys, enter, eof, wait_seconds, wait_for, client_gone, operator,
                                cancel, progress)

    def kill(self, task_id: str, force: bool = False, wait_seconds: float | None = None) -> KillOutcome:
        """Cancel a pending task, signal a running one's group (then wait up to `wait_seconds`, default 2, for
        its end), or stop a finished task's leftover processes (kill.py)."""
        return kill_verb.kill(self.rooms, task_id, force, wait_seconds)

    def list(self, state: str | None = None, limit: int | None = None,
             offset: int = 0) -> tuple[list[TaskSnapshot], int]:
        """Tasks newest first, optionally of one state, from `offset`; (views without tails, total matching)."""
        return listing.list_tasks(self.rooms, state, limit, offset)
