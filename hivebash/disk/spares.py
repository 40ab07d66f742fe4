"""Task files made ahead of time: the output files and record temp files of a future task, made by a `run` once
its own answer is sent (common/protocol/after_answer.py), so the next `run` starts with them made.

Each task needs three new files before its process may start (`<id>.out`, `<id>.err`, and the temp file its
pending record is written into and renamed from) and one more before its end is answered (the temp file of
its terminal record, with the disk blocks that record needs reserved: its end is recorded on a full disk). A
creation takes the directory's lock and kernel time on ext4. Made on a call's path, before the spawn or while
bash starts (it then shares a core with the new process), they cost the round trip; made after the answer,
while the client reads it, they cost it nothing (docs/performance.md, "Measurements behind the code").

A spare is an id no task holds, with its four files open. It is held in memory only: a daemon that dies leaves
its spares' files behind, empty and without a record, and the next start removes them (TaskStore.load_all).
Only unnamed runs take a spare; a name that equals a spare's id drops that spare first.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from hivebash.disk.end_room import Temp
from hivebash.disk.store import TaskStore

log = logging.getLogger(__name__)

SPARES_KEPT = 1  # spares made ahead; runs one after the other use one each, and each inline wait makes one


@dataclass(frozen=True)
class Spare:
    id: str
    out: int  # open for appending, like TaskStore.prepare's
    err: int
    record_tmp: Temp  # the pending record's temp file, open for writing
    next_tmp: Temp  # the terminal record's, its room reserved (TaskStore.save_pending)

    def fds(self) -> tuple[int, ...]:
        return self.out, self.err, self.record_tmp.fd, self.next_tmp.fd


class SpareFiles:
    """The spares of one store. Thread-safe; `make` does its file work outside the lock."""

    def __init__(self, store: TaskStore, kept: int = SPARES_KEPT):
        self.store = store
        self.kept = kept
        self._lock = threading.Lock()
        self._spares: dict[str, Spare] = {}
        self._making: set[str] = set()
        self._closed = False

    def take(self) -> Spare | None:
        """A spare for an unnamed run, or None (then the run makes its files itself)."""
        with self._lock:
            return self._spares.pop(next(iter(self._spares)), None) if self._spares else None

    def holds(self, task_id: str) -> bool:
        """True while `task_id` is a spare's (or one being made): no task may take that id meanwhile."""
        with self._lock:
            return task_id in self._spares or task_id in self._making

    def reserve(self, task_id: str) -> bool:
        """Hold `task_id` for a spare about to be made (the engine calls this under its lock, having checked
        that no task holds the id); False if enough spares are kept already."""
        with self._lock:
            if self._closed or len(self._spares) + len(self._making) >= self.kept:
                return False
            self._making.add(task_id)
            return True

    def make(self, task_id: str) -> None:
        """Make the spare of a reserved id. Never raises: a failure only means a later run makes its own files."""
        spare = None
        try:
            spare = Spare(task_id, *self.store.make_spare(task_id))
        except OSError as exc:  # taken on disk (a record unreadable at start), or a full disk: no spare this time
            log.debug("no spare files for %s: %s", task_id, exc)
        except Exception:  # a bug: logged, and the reservation goes all the same (else no spare is ever made again)
            log.exception("making the spare files of %s failed", task_id)
        with self._lock:
            self._making.discard(task_id)
            if spare is not None and not self._closed:
                self._spares[task_id] = spare
                spare = None
        if spare is not None:  # closed meanwhile
            self.discard(spare)

    def drop(self, task_id: str) -> None:
        """Remove the spare of `task_id`, if there is one (a named run is about to use that name)."""
        with self._lock:
            spare = self._spares.pop(task_id, None)
        if spare is not None:
            self.discard(spare)

    def discard(self, spare: Spare) -> None:
        """Close a spare's files and remove them (a spare no run will take)."""
        self.store.discard_spare(spare.id, spare.fds())

    def close(self) -> None:
        """Remove every spare's files (the daemon is stopping)."""
        with self._lock:
            self._closed = True
            spares, self._spares = list(self._spares.values()), {}
        for spare in spares:
            self.discard(spare)
