"""`hive-bash tail -f`'s (and `attach`'s) copy of an output file to the terminal, past its dropped middle.

Past --max-output-bytes the daemon frees the middle of a running task's file (hivebash/disk/output_limit.py): it
reads back as NUL bytes. The daemon records each range before it frees it, so a read that met freed bytes is
followed by a look at the record (a status call) that names them: the copy prints what lies outside the range,
one marker line for it, and goes on at its end. A range that widens while the copy reads is found the same way
(its next NULs): no NUL byte of a freed range reaches the terminal. Bytes the task itself wrote as NULs, outside
any range, are copied as they are.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import BinaryIO

from hivebash.output_views.kept import Gap

CHUNK = 1 << 16


class KeptCopier:
    """Copies a file from `pos` on to `out`, skipping the range `gap()` names (asked only after a read met a
    NUL byte)."""

    def __init__(self, fd: int, out: BinaryIO, pos: int, gap: Callable[[], Gap | None]):
        self.fd, self.out, self.pos, self.gap = fd, out, pos, gap
        self.crlf = False  # line ends written as \r\n (a terminal in raw mode)
        self.known: Gap | None = None  # the range last named
        self.skipped_to = 0  # the end of what the marker lines told of
        self.line_open = False  # the last byte written ended no line

    def start(self, known: Gap | None) -> None:
        """Begin at `pos`, or at the end of the range `known` when `pos` falls into it."""
        self.known = known
        if known is not None and known.start <= self.pos < known.end:
            self._skip(known)

    def copy(self) -> None:
        """Copy what was written since the last copy, up to the file's end now."""
        while chunk := os.pread(self.fd, CHUNK, self.pos):
            if b"\0" in chunk:
                gap = self.known if _covers(self.known, self.pos, len(chunk)) else self.gap()
                self.known = gap or self.known
                if gap is not None and _covers(gap, self.pos, len(chunk)):
                    self._write(chunk[: max(0, gap.start - self.pos)])
                    self._skip(gap)
                    continue
            self._write(chunk)
            self.pos += len(chunk)
        self.out.flush()

    def _write(self, data: bytes) -> None:
        if data:
            self.out.write(data.replace(b"\n", b"\r\n") if self.crlf else data)
            self.line_open = not data.endswith(b"\n")

    def _skip(self, gap: Gap) -> None:
        """One marker line for the bytes of the range not yet copied (a range that widened: the newly freed)."""
        notice = dataclasses.replace(gap, start=max(gap.start, self.pos)).notice()
        if self.skipped_to > gap.start:
            notice = notice.replace(" dropped from", " more dropped from", 1)
        self._write((b"\n" if self.line_open else b"") + notice.encode() + b"\n")
        self.pos = self.skipped_to = gap.end


def _covers(gap: Gap | None, pos: int, n: int) -> bool:
    """Whether the range meets the bytes [pos, pos + n)."""
    return gap is not None and gap.start < pos + n and gap.end > pos


def status_gap(data: dict, stream: str) -> Gap | None:
    """A stream's dropped range from a status's data (`dropped`, snapshot.to_dict)."""
    got = (data.get(stream) or {}).get("dropped")
    if not got:
        return None
    return Gap(got["from_byte"], got["to_byte"], got["limit"], got.get("over", "--max-output-bytes")[6:-6])
