"""`Rooms`: what the verbs (run.py, status.py, kill.py, listing.py, retention.py, recovery.py, shutdown.py)
work with, built once by the engine. Only `registry` holds tasks; the rest are the rooms around it."""

from __future__ import annotations

import random
from dataclasses import dataclass

from common.config import BashSettings
from common.todos import Todos
from common.waiting import Doorbell
from hivebash.answers.answering import Answers
from hivebash.disk.records import RecordWriter
from hivebash.disk.spares import SpareFiles
from hivebash.disk.store import TaskStore
from hivebash.processes.lifecycle import Lifecycle
from hivebash.processes.ops import TaskProcessOps
from hivebash.processes.reaper import OrphanReaper
from hivebash.tasks.registry import TaskRegistry


@dataclass
class Rooms:
    settings: BashSettings
    store: TaskStore
    records: RecordWriter
    registry: TaskRegistry
    lifecycle: Lifecycle
    answers: Answers
    spares: SpareFiles
    ops: TaskProcessOps
    reaper: OrphanReaper
    wake: Doorbell  # rung by task ends and new orphan watches; must take no lock
    subreaper: bool
    wait_cap: float
    default_cwd: str  # a task's cwd when none is given: the daemon's, which never changes
    # Ids and marker nonces need to be unique, not secret (a marker only names a task's processes to this
    # daemon). A generator seeded once from the OS makes them without a syscall: getrandom would give up the GIL
    # on every run() (docs/performance.md, "Measurements behind the code").
    ids: random.Random
    todos: Todos  # the engine's (common/todos): for the outbox's repair after a run's answer

    def new_id(self) -> str:
        return f"{self.ids.getrandbits(32):08x}"

    def our_markers(self) -> set[str]:
        with self.registry.locked() as tasks:
            return {e.task.marker for e in tasks.entries()}
