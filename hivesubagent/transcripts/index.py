"""Incremental summaries of claude's transcripts, so a look-up costs what changed, not the size of the folder.

The project folder is shared with every other claude run in the same directory (the agent's own long session
included), so most transcripts are foreign and some are large and growing. Per file this index remembers
what it read: the file's identity (device, inode), the byte offset read up to (always the end of a complete
line: a line still being written is left for the next look), and a fingerprint of the bytes just before that
offset. A file that grew is read from the offset only; one whose inode changed, that shrank below the offset,
or whose fingerprint no longer matches (rewritten in place) is read afresh.

Two depths of reading:
- the name (every file): decided from the file's last TAIL_BYTES, or its first HEAD_BYTES when the tail has no
  `custom-title` (claude writes one when a session starts and at the end of every turn, so a session this
  daemon named shows its name in one of the two); after that only appended bytes are searched for titles. A
  foreign transcript is never read whole. (A title written only in the middle of a file, beyond both windows,
  is not seen: the name of a session renamed mid-way by hand, whose later turns all ran long.)
- the summary (named files only): a TranscriptReader fed every complete line once, in order, skipping the
  parse of lines that cannot change the summary (transcript_fold.py).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hivesubagent.transcripts.fold import TITLE, fold, is_title, parse
from hivesubagent.transcripts.transcript import Transcript, TranscriptReader

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 64 * 1024
FINGERPRINT_BYTES = 64
READ_BLOCK = 4 * 1024 * 1024  # appended bytes are read in blocks this size (a line longer than it is read whole)



@dataclass
class _Mark:
    """How far one file was read, and how to tell that it is still the same file."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    offset: int
    fingerprint: bytes

    def unchanged(self, st: os.stat_result) -> bool:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (self.dev, self.ino, self.size, self.mtime_ns)

    def continued_by(self, fd: int, st: os.stat_result) -> bool:
        """The file is this one with bytes appended (not replaced, truncated or rewritten)."""
        if (st.st_dev, st.st_ino) != (self.dev, self.ino) or st.st_size < self.offset:
            return False
        start = self.offset - len(self.fingerprint)
        return os.pread(fd, len(self.fingerprint), start) == self.fingerprint


@dataclass
class _Entry:
    mark: _Mark
    name: str | None
    reader: TranscriptReader | None = None  # named transcripts only: their whole summary so far
    turn_start: int | None = None  # the offset of the line that starts the reader's last turn (its prompt)
    # Restored from a saved index instead of `reader`: the summary as it stood just before `turn_start`, which
    # holds no text of the session; the last turn is read again from the transcript on the first look.
    before_turn: TranscriptReader | None = None


def _mark(fd: int, st: os.stat_result, offset: int) -> _Mark:
    start = max(0, offset - FINGERPRINT_BYTES)
    return _Mark(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, offset, os.pread(fd, offset - start, start))


def last_title(data: bytes) -> str | None:
    """The last custom-title among the lines of `data` (only lines holding the marker are parsed)."""
    end = len(data)
    while True:
        hit = data.rfind(TITLE, 0, end)
        if hit < 0:
            return None
        start = data.rfind(b"\n", 0, hit) + 1
        stop = data.find(b"\n", hit)
        entry = parse(data[start : stop if stop >= 0 else len(data)])
        if entry and is_title(entry):
            return entry["customTitle"]
        end = start


def _complete_blocks(fd: int, offset: int, size: int):
    """(bytes of complete lines, offset after them) from `offset` on, a block at a time; stops before a line
    that is still being written."""
    block = READ_BLOCK
    while offset < size:
        data = os.pread(fd, min(block, size - offset), offset)
        end = data.rfind(b"\n") + 1
        if end == 0:
            if offset + len(data) >= size:
                return  # the last line is incomplete: left for the next look
            block *= 2  # one line longer than the block: read it whole
            continue
        block = READ_BLOCK
        offset += end
        yield data[:end], offset


class TranscriptIndex:
    """Per-file names and summaries, each brought up to date by reading only what was appended."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}  # by path as a string: a Path costs more to hash than a look-up
        self._lock = threading.Lock()
        self.version = 0  # counts changes, so a keeper saves only what changed (index_file.py)

    def name(self, path: str | Path) -> str | None:
        """The session name of one transcript (None: unnamed, or gone)."""
        try:
            with self._lock:
                return self._refresh(os.fspath(path), full=False).name
        except OSError:
            return None

    def summary(self, path: str | Path) -> Transcript:
        """Everything the transcript says (raises OSError if it cannot be read)."""
        with self._lock:
            entry = self._refresh(os.fspath(path), full=True)
            assert entry.reader is not None, "a full refresh reads the whole transcript"
            return entry.reader.snapshot(entry.mark.mtime_ns / 1e9)

    def turn_start(self, path: str | Path) -> int | None:
        """Where the last turn's prompt line starts in the transcript, as its last summary found it (None:
        not known); what reads only the last turn starts there."""
        with self._lock:
            entry = self._entries.get(os.fspath(path))
            return None if entry is None else entry.turn_start

    def forget_except(self, paths: set[str]) -> None:
        """Drop what is remembered of files no longer in the folder (archived, deleted)."""
        with self._lock:
            for path in [p for p in self._entries if p not in paths]:
                del self._entries[path]
                self.version += 1

    def entries(self) -> int:
        return len(self._entries)

    def export(self, convert: Callable[[_Entry], Any]) -> dict[str, Any]:
        """`convert` of every entry, under the lock: a reader is never caught half-fed."""
        with self._lock:
            return {path: convert(entry) for path, entry in self._entries.items()}

    def adopt(self, entries: dict[str, _Entry]) -> None:
        """Take entries saved by an earlier run; each is checked against its file before it is used."""
        with self._lock:
            for path, entry in entries.items():
                self._entries.setdefault(path, entry)

    def _refresh(self, path: str, full: bool) -> _Entry:
        entry = self._entries.get(path)
        try:
            st = os.stat(path)
            if entry is not None and entry.mark.unchanged(st) and (entry.reader is not None or not full):
                return entry  # the common case: one stat, nothing read
            # O_NONBLOCK: a FIFO put where a transcript was must not hang the look-up (no effect on a file).
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            if self._entries.pop(path, None) is not None:
                self.version += 1
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self._entries.pop(path, None)
                raise OSError(f"{path}: not a regular file")
            known = entry if entry is not None and entry.mark.continued_by(fd, st) else None  # read on from it
            if known is not None and known.reader is not None:
                entry = self._read_on(known, fd, st, known.mark.offset)
            elif known is not None and full and known.before_turn is not None and known.turn_start is not None:
                known.reader, known.before_turn = known.before_turn, None
                entry = self._read_on(known, fd, st, known.turn_start)
            elif full:
                fresh = _Entry(_Mark(st.st_dev, st.st_ino, 0, 0, 0, b""), None, TranscriptReader(Path(path)))
                entry = self._read_on(fresh, fd, st, 0)
            elif known is not None:
                name = known.name
                entry = self._names_on(known, fd, st)
                if entry.name == name:
                    # Not worth saving: after a restart, the appended bytes are searched again from the old
                    # offset, in C. So the agent's own growing session does not rewrite the index file.
                    return entry
            else:
                entry = self._decide_name(fd, st)
            self._entries[path] = entry
            self.version += 1
            return entry
        finally:
            os.close(fd)

    @staticmethod
    def _read_on(entry: _Entry, fd: int, st: os.stat_result, offset: int) -> _Entry:
        reader = entry.reader
        assert reader is not None, "an entry is read on only with its reader"
        for data, end in _complete_blocks(fd, offset, st.st_size):
            if (prompt := fold(reader, data)) >= 0:
                entry.turn_start = end - len(data) + prompt
            offset = end
        entry.name = reader.t.name
        entry.mark = _mark(fd, st, offset)
        return entry

    @staticmethod
    def _names_on(entry: _Entry, fd: int, st: os.stat_result) -> _Entry:
        offset = entry.mark.offset
        for data, end in _complete_blocks(fd, offset, st.st_size):
            entry.name = last_title(data) or entry.name
            offset = end
        entry.mark = _mark(fd, st, offset)
        return entry

    @staticmethod
    def _decide_name(fd: int, st: os.stat_result) -> _Entry:
        """A file not seen before: its name from the tail, else the head; never the middle."""
        size = st.st_size
        tail_start = max(0, size - TAIL_BYTES)
        tail = os.pread(fd, size - tail_start, tail_start)
        end = tail.rfind(b"\n") + 1
        # The tail's first line is whole only when the tail starts the file.
        first = 0 if tail_start == 0 else tail.find(b"\n") + 1
        name = last_title(tail[first:end]) if end > first else None
        if name is None and tail_start > 0:
            head = os.pread(fd, min(HEAD_BYTES, tail_start), 0)
            name = last_title(head[: head.rfind(b"\n") + 1])
        offset = tail_start + end if end else tail_start
        return _Entry(_mark(fd, st, offset), name)
