"""Who writes a task's record when (`RecordWriter`, which orders every write of one id). What a record holds is
`tasks.record.record_of`; the files themselves are the store's (store.py)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from hivebash.disk.end_room import Temp
from hivebash.disk.store import TaskStore, unlink_missing_ok


class RecordWriter:
    """Orders every record write of a task id: one write at a time per id, and only for the task that owns it.

    Who writes which record, and when:
    - `pending`: `run`, before the task is queued: it must be on disk before the process exists, because it
      holds the marker a restart needs to find the task's leftover processes, and a task the caller was told
      about must survive a crash (as `interrupted`).
    - `running`: the task's worker, once the task has run for runner.RUNNING_RECORD_DELAY; a task that ends
      sooner goes from its pending record to its terminal one.
    - terminal (`done`, `timed_out`, `killed`, `interrupted`): the thread that ended the task, before any
      inline wait answers with it.

    What a crash (the daemon killed; the machine stays up) leaves, at each point of a task's life:
    - before the pending record's rename: no record (the caller got an error or no answer; no process ran),
      at most a `.<id>.json.tmp`, removed at the next start, and empty output files;
    - from then until the running record's rename (the process may already run): the pending record; the
      next start finds the task's processes by the record's marker, stops them and records `interrupted`,
      saying the task was running when it found any (Engine.open);
    - until the terminal record's rename: the running record -> `interrupted` at the next start;
    - after it: the terminal record, which is what every inline answer said.
    A power cut leaves, per task, one of these records as it last reached the disk (`--fsync always`: the
    last one written; `batched`: possibly one written up to a flush window earlier); the task's processes died
    with the machine.

    Ownership: a record is written only for the task that currently owns its id (`own`). A reused name or a
    pruned task changes the owner, which waits for a write of the id in progress, so a late write of a
    finished task can never replace the record of the new task with its name, nor bring a pruned record back
    (two writers of one id would also share its temp file, and one rename would fail).
    """

    def __init__(self, store: TaskStore):
        self.store = store
        self._writes_changed = threading.Condition(threading.Lock())  # guards _owner and _busy
        self._owner: dict[str, object] = {}
        self._busy: set[str] = set()  # ids whose record is being written or deleted right now
        self._made: dict[str, Temp] = {}  # id -> temp file made ahead (room reserved) for its terminal record

    def own(self, task_id: str, owner: object | None) -> None:
        """Only `owner`'s records are written as `task_id` from now on (None: nobody's)."""
        with self._writes_changed:
            if owner is None:
                self._owner.pop(task_id, None)
            else:
                self._owner[task_id] = owner
            while task_id in self._busy:
                self._writes_changed.wait()
            made = self._made.pop(task_id, None)
        if made is not None:  # made for the previous owner's next record, which never came
            os.close(made[0])
            unlink_missing_ok(made[1])

    def made_next(self, task_id: str, made: Temp) -> None:
        """An empty temp file for the terminal record of `task_id`, made ahead with its room reserved."""
        with self._writes_changed:
            old, self._made[task_id] = self._made.get(task_id), made
        if old is not None:
            os.close(old[0])

    def release(self, task_id: str, owner: object, delete: Callable[[str], None]) -> bool:
        """Retention: if `owner` still owns `task_id`, disown it and call `delete(task_id)` while no record of
        the id can be written (a `run` reusing the name waits in `own`). False if the name was taken again."""
        with self._writes_changed:
            if self._owner.get(task_id) is not owner:
                return False
            del self._owner[task_id]
            self._claim(task_id)
        try:
            delete(task_id)
        finally:
            self._done(task_id)
        return True

    def save_now(self, task_id: str, owner: object, record: dict, terminal: bool = False) -> None:
        """Write `record` (temp, rename) unless `owner` no longer owns the id. Raises OSError. A `terminal`
        record goes into the temp file reserved for it (`save_pending`), if there is one."""
        with self._writes_changed:
            while task_id in self._busy:
                self._writes_changed.wait()
            made = self._made.pop(task_id, None) if terminal else None
            if self._owner.get(task_id) is not owner:
                if made is not None:  # (its name is left for the next create_fresh of that path)
                    os.close(made[0])
                return
            self._claim(task_id)
        try:
            self.store.save_dict(task_id, record, made)
        finally:
            self._done(task_id)

    def save_pending(self, task_id: str, record: dict, made: Temp | None, end: Temp | None) -> None:
        """The pending record of the id's new owner (`own` was just called), with the room for its end reserved
        (TaskStore.save_pending); `made` and `end` are consumed either way."""
        with self._writes_changed:
            self._claim(task_id)
        try:
            reserved = self.store.save_pending(task_id, record, made, end)
        finally:
            self._done(task_id)
        self.made_next(task_id, reserved)

    def _claim(self, task_id: str) -> None:
        while task_id in self._busy:
            self._writes_changed.wait()
        self._busy.add(task_id)

    def _done(self, task_id: str) -> None:
        with self._writes_changed:
            self._busy.discard(task_id)
            self._writes_changed.notify_all()
