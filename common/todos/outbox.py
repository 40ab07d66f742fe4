"""The on-disk half of the pending todos: one append-only journal per source,
`<state_dir>/todos/<source>/outbox.jsonl` (0700/0600), a JSON line per change, each one write(2), so a change
survives a kill -9 the moment `save`/`drop` returns. Why a journal, when it is rewritten, and what a full disk
does: docs/design.md, "The todo outbox".
"""

from __future__ import annotations

import errno
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.disk.safe_files import NOFOLLOW
from common.disk.state_dir import remake_dir
from common.disk.whole_files import replace_whole, reserve, write_all
from common.json_text import utf8_line
from common.todos.wire import os_reason

log = logging.getLogger(__name__)

OUTBOX_DIRNAME = "todos"  # under the daemon's state directory; one subdirectory per source
JOURNAL_NAME = "outbox.jsonl"
FILE_MODE = 0o600
COMPACT_MIN_LINES = 4096  # lines; below this a journal is never rewritten while running (a few MiB at most)
ROOM = 64 * 1024  # bytes of disk kept allocated past the journal's end: a few dozen todos while the disk is full


@dataclass(frozen=True)
class Stored:
    """One pending entry read back: order of its last change, key, and the message as it was written."""

    seq: int
    key: str
    message: dict[str, Any]


class Outbox:
    """Save and drop pending entries by key; `load` reads back what an earlier run left.

    When the directory cannot be used (read-only disk, permissions) the outbox logs once and the todos stay in
    memory only: delivery must never fail a tool call. Not thread-safe: the caller holds its lock.
    """

    def __init__(self, directory: Path, fsync: bool = False):
        self.directory = directory
        self.journal = directory / JOURNAL_NAME
        self.fsync = fsync
        self._fd: int | None = None
        self._lines = 0  # lines in the journal since it was last rewritten
        self._live: dict[str, Stored] = {}  # what a rewrite keeps
        self._needs_rewrite = False
        self._size = 0  # bytes in the journal
        self._room_to = 0  # the journal's disk blocks are allocated up to here
        self._keeps_room = True  # False where the file system keeps no blocks ahead (EOPNOTSUPP)
        self._room_warned = False  # the disk is full and the room is running out: said once
        self.unsaved = False  # a change is in memory only (the last write failed): a crash would lose it
        self.usable = self._prepare()

    def _prepare(self) -> bool:
        try:
            self.directory.parent.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the state dir, shared
            for level in (self.directory.parent, self.directory):
                level.mkdir(mode=0o700, exist_ok=True)
            for own in (self.directory.parent, self.directory):
                os.chmod(own, 0o700)
            return True
        except OSError as e:
            log.error("todo outbox %s is unusable (%s): todos are kept in memory only", self.directory, os_reason(e))
            return False

    # ----- changes -----------------------------------------------------------------------------------------

    def save(self, seq: int, key: str, message: dict[str, Any]) -> None:
        """`message` is now the newest pending state of `key`. On a disk error: logged, kept in memory."""
        self._live[key] = Stored(seq, key, message)
        self._append({"seq": seq, "key": key, "message": message})

    def drop(self, key: str) -> None:
        """`key` has nothing pending any more (delivered, or cancelled by a clear)."""
        if self._live.pop(key, None) is not None:
            self._append({"key": key, "done": True})

    def _append(self, line: dict[str, Any]) -> None:
        if not self.usable:
            return
        try:
            if self._needs_rewrite or self._fd is None or self._grown_too_long():
                self.rewrite()  # the new line is in self._live already (or its removal is)
                return
            data = utf8_line(line).encode("utf-8", "replace") + b"\n"
            write_all(self._fd, data)
            if self.fsync:
                os.fsync(self._fd)
            self._lines += 1
            self._size += len(data)
            if self._keeps_room and self._room_to - self._size < ROOM // 2:
                self._keep_room()
        except OSError as e:
            self._failed(e)

    def _failed(self, e: OSError) -> None:
        self._needs_rewrite = True  # a partial line must not run into the next one
        if not self.unsaved:
            log.error("todo outbox: could not write %s (%s): %d pending todo(s) are kept in memory only, and a "
                      "crash would lose them; written again at the next change", self.journal, os_reason(e),
                      len(self._live))
        self.unsaved = True

    def _keep_room(self) -> None:
        """Keep ROOM bytes allocated past the end; on a full disk, what is left of the room serves meanwhile."""
        if self._fd is None:
            return
        assert self._fd is not None
        try:
            reserve(self._fd, self._size + ROOM)
            self._room_to, self._room_warned = self._size + ROOM, False
        except OSError as e:
            if e.errno != errno.ENOSPC:  # the file system keeps no room (EOPNOTSUPP): write as it comes
                self._keeps_room = False
            elif not self._room_warned:  # tried again after each line, said once
                log.warning("todo outbox: the disk is full; %d bytes of room are left for todos (%s)",
                            max(0, self._room_to - self._size), self.journal)
                self._room_warned = True

    def _grown_too_long(self) -> bool:
        return self._lines >= COMPACT_MIN_LINES and self._lines >= 4 * len(self._live)

    def rewrite(self) -> None:
        """Replace the journal by the pending entries alone (temp file, rename); reopen it for appending."""
        data = b"".join(utf8_line({"seq": s.seq, "key": s.key, "message": s.message})
                        .encode("utf-8", "replace") + b"\n" for s in sorted(self._live.values(), key=lambda s: s.seq))
        self.close()
        # Whole or not at all: on a full disk the old journal stays, and with it every line written before.
        replace_whole(str(self.journal), data, str(self.directory / f".{JOURNAL_NAME}.tmp"), FILE_MODE, self.fsync)
        self._sync_dir()
        self._fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        self._lines, self._size, self._room_to = len(self._live), len(data), len(data)
        if self._keeps_room:
            self._keep_room()
        self._needs_rewrite = False
        if self.unsaved:
            log.info("todo outbox: %s is whole again (%d pending todo(s) on disk)", self.journal, len(self._live))
            self.unsaved = False

    def looks_removed(self) -> bool:
        """One fstat, safe without the delivery's lock: a descriptor closed meanwhile answers True (the caller
        then checks again under the lock); one whose number was reused at that instant may answer False, and
        the removal is then seen at the next check (the next answer, or the delivery thread's next send)."""
        fd = self._fd
        if not self.usable or fd is None:
            return False
        try:
            return os.fstat(fd).st_nlink == 0
        except OSError:
            return True

    def repair_if_removed(self) -> bool:
        """Make the journal again, from memory, if it was removed under us (its directory too): appends to a
        removed file reach no disk. One fstat. True when it was made again."""
        if not self.usable or self._fd is None or os.fstat(self._fd).st_nlink > 0:
            return False
        log.warning("todo outbox %s was removed while the daemon ran: made again with the %d pending todo(s)",
                    self.journal, len(self._live))
        try:
            for level in (self.directory.parent, self.directory):
                remake_dir(level)
            self.rewrite()
        except OSError as e:
            self._failed(e)
            return False
        return True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # ----- reading back --------------------------------------------------------------------------------------

    def load(self) -> list[Stored]:
        """What an earlier run left pending, oldest change first; the journal is then rewritten with just that."""
        if not self.usable:
            return []
        try:
            self._live.update(read_journal(self.journal))
            self.rewrite()
        except OSError as e:
            log.error("todo outbox %s cannot be read (%s): earlier todos stay there", self.directory, os_reason(e))
            self._needs_rewrite = False
            self.usable = False
            return []
        return sorted(self._live.values(), key=lambda s: s.seq)

    def _sync_dir(self) -> None:
        if not self.fsync:
            return
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_journal(path: Path) -> dict[str, Stored]:
    """The pending entries a journal describes, by key (no side effect; a missing journal is empty). A line
    that does not parse is skipped with a warning: only a power cut in the middle of a write makes one."""
    try:
        with open(os.open(path, os.O_RDONLY | NOFOLLOW), "rb") as f:  # a planted link is an error, not followed
            data = f.read()
    except FileNotFoundError:
        return {}
    live: dict[str, Stored] = {}
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            key = line["key"]
            if not isinstance(key, str):
                raise ValueError("key: not a string")
            if line.get("done") is True:
                live.pop(key, None)
                continue
            seq, message = line["seq"], line["message"]
            if not isinstance(seq, int) or not isinstance(message, dict):
                raise ValueError("seq/message: wrong types")
        except (ValueError, KeyError, TypeError) as e:
            log.warning("todo outbox %s: line %d is unreadable (%s); skipped", path, number, e)
            continue
        live[key] = Stored(seq, key, message)
    return live
