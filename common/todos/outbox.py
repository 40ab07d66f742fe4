"""The on-disk half of the pending todos: one append-only journal per source.

`<state_dir>/todos/<source>/outbox.jsonl` (directories 0700, file 0600) holds one JSON line per change:
`{"seq": N, "key": K, "message": {...}}` when K's newest undelivered state becomes `message`, and
`{"key": K, "done": true}` when K has nothing left to deliver. Reading the lines in order gives the
pending map back. Each change is one `write(2)` on a descriptor kept open with O_APPEND, so a line is in the
kernel's page cache (and survives a kill -9 of the daemon) the moment `save`/`drop` returns.

A journal rather than a file per key: every rename over an existing file, and every unlink after a delivery,
frees an inode, and on ext4 without a journal each later file creation scans past every inode freed in the
last minute (ext4's recently_deleted(); docs/design.md, "Facts the code relies on"). The bash daemon writes
two todos a task, so a file per key would slow task creation down under load; one line is also one syscall.

The journal is rewritten with only the pending entries (temp file, rename) when it has grown to
COMPACT_MIN_LINES and four times the entries still pending, at start-up, and after a failed write (a partial
line must not run into the next one). A line that does not parse (a power cut in the middle of a write) is
skipped with a warning.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.safe_files import NOFOLLOW, create_fresh
from common.todos.wire import os_reason

log = logging.getLogger(__name__)

OUTBOX_DIRNAME = "todos"  # under the daemon's state directory; one subdirectory per source
JOURNAL_NAME = "outbox.jsonl"
FILE_MODE = 0o600
COMPACT_MIN_LINES = 4096  # lines; below this a journal is never rewritten while running (a few MiB at most)


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
            data = json.dumps(line, ensure_ascii=False).encode("utf-8", "replace") + b"\n"
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(0, f"short write ({written} of {len(data)} bytes)")
            if self.fsync:
                os.fsync(self._fd)
            self._lines += 1
        except OSError as e:
            self._needs_rewrite = True  # a partial line must not run into the next one
            log.error("todo outbox: could not write %s (%s); kept in memory, rewritten at the next change",
                      self.journal, os_reason(e))

    def _grown_too_long(self) -> bool:
        return self._lines >= COMPACT_MIN_LINES and self._lines >= 4 * len(self._live)

    def rewrite(self) -> None:
        """Replace the journal by the pending entries alone (temp file, rename); reopen it for appending."""
        tmp = self.directory / f".{JOURNAL_NAME}.tmp"
        data = b"".join(json.dumps({"seq": s.seq, "key": s.key, "message": s.message}, ensure_ascii=False)
                        .encode("utf-8", "replace") + b"\n" for s in sorted(self._live.values(), key=lambda s: s.seq))
        self.close()
        fd = create_fresh(str(tmp), os.O_WRONLY, FILE_MODE)
        try:
            view = memoryview(data)
            while view:  # a journal of many pending todos can be megabytes: write(2) may take only part
                view = view[os.write(fd, view):]
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.journal)
        self._sync_dir()
        self._fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        self._lines = len(self._live)
        self._needs_rewrite = False

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
