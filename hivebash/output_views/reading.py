"""Reading a task's output files for the views: the shared types and limits, blocks of whole lines, one
line at an offset, and the shown (cleaned, capped) text of a line. Never whole files: an output may be many GiB."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from common.protocol.tools import Refusal
from hivebash.output_views.kept import Gap, OutputFile, open_kept
from hivebash.output_views.terminal_text import readable

BLOCK = 8 << 20  # bytes read per system call by the scans
VIEW_BUDGET = 6 * 1024  # bytes of view text in one answer: the facts lines above it fit in the rest of 8 KiB
LINE_CAP = 400  # characters shown of one line; the rest is elided and counted
CONTEXT_MAX = 10
MAX_LINES_MAX = 500
GREP_SECONDS = 10.0  # a pattern that matches most lines of a huge file makes every line Python work: stop counting


class ViewError(Refusal):
    """A view argument the files cannot answer (the message names the field and the rule)."""


@dataclass(frozen=True)
class Source:
    """One output stream of a task: its name in answers (stdout/stderr) and its file."""

    stream: str
    path: str
    size: int | None = None  # its size when the caller knows it already (taken at the task's end): no stat
    gap: Gap | None = None  # its dropped middle (kept.py), from the task's record


@dataclass
class Line:
    stream: str
    number: int
    text: str  # cleaned and cut to LINE_CAP
    match: bool = True
    from_gap: bool = False  # after a dropped middle: `number` is counted from the gap (kept.py)

    @property
    def label(self) -> str:
        """The number as answers show it: `~N` when counted from the gap."""
        return f"~{self.number}" if self.from_gap else str(self.number)


@dataclass
class View:
    """A rendered view: the text for the model, the data for programs, and where each stream was read up to."""

    text: str
    data: dict
    read_to: dict[str, int] = field(default_factory=dict)  # stream -> byte offset shown up to (for new_only)


def file_size(path: str) -> int:
    """An output file's size, 0 while it does not exist (a link is not followed)."""
    try:
        return os.stat(path, follow_symlinks=False).st_size
    except FileNotFoundError:
        return 0


def open_output(src: Source) -> OutputFile | None:
    """The output file open for reading, its dropped middle shown as one line (kept.py); None when it is
    missing, or when something else was planted there (a link: ELOOP; a FIFO: not waited on): its text must
    never reach the model (the task's note says why)."""
    return open_kept(src.path, src.gap)


def blocks(f: OutputFile, start: int, buf: bytearray, stop: int | None = None):
    """(block, length, offset): blocks of whole lines from `start` to `stop` (default: the end of the file;
    the last piece may end without `\\n`; a line longer than the block comes in pieces). `block` is reused:
    use it before the next one is read."""
    view = memoryview(buf)
    offset = start
    while stop is None or offset < stop:
        n = f.preadv(view if stop is None else view[: min(len(buf), stop - offset)], offset)
        if n <= 0:
            return
        end = n if n < len(buf) else (buf.rfind(b"\n", 0, n) + 1 or n)  # short: the end of the file or range
        yield buf, end, offset
        offset += end


def shown_text(raw: bytes, span: int | None = None) -> str:
    """A line as the model sees it: cleaned of terminal noise, cut to LINE_CAP characters. `span`: the bytes
    the whole line takes (with its newline), when `raw` is only its start (read_line_at reads LINE_CAP*4
    bytes of it): what was not read is counted in bytes, so a 100,000-character line says so."""
    text = readable(raw)
    unread = 0 if span is None else max(0, span - len(raw) - 1)
    if len(text) > LINE_CAP or unread:
        more = len(text[LINE_CAP:].encode()) + unread
        text = f"{text[:LINE_CAP]}… ({more:,} more {'bytes' if unread else 'characters'})"
    return text


def read_line_at(f: OutputFile, offset: int) -> tuple[bytes, int]:
    """The line starting at `offset` (its first LINE_CAP*4 bytes) and the offset of the next line."""
    chunk = f.pread(LINE_CAP * 4 + 1, offset)
    nl = chunk.find(b"\n")
    if nl >= 0:
        return chunk[:nl], offset + nl + 1
    if len(chunk) <= LINE_CAP * 4:
        return chunk, offset + len(chunk)
    nxt = _find_newline(f, offset + len(chunk))
    return chunk[: LINE_CAP * 4], nxt


def _find_newline(f: OutputFile, offset: int) -> int:
    """The offset just past the next `\\n` at or after `offset` (the file's end if none)."""
    while True:
        chunk = f.pread(1 << 16, offset)
        if not chunk:
            return offset
        nl = chunk.find(b"\n")
        if nl >= 0:
            return offset + nl + 1
        offset += len(chunk)


def line_start_before(f: OutputFile, offset: int, lines: int) -> tuple[int, int]:
    """Going back from the start of a line at `offset` over up to `lines` lines: (new offset, lines gone back)."""
    back = 0
    while back < lines and offset > 0:
        lo = max(0, offset - 1 - (1 << 16))
        chunk = f.pread(offset - 1 - lo, lo)  # without the newline that ends the previous line
        nl = chunk.rfind(b"\n")
        while nl < 0 and lo > 0:  # a long line: keep going back
            lo2 = max(0, lo - (1 << 16))
            chunk = f.pread(lo - lo2, lo2) + chunk
            lo = lo2
            nl = chunk.rfind(b"\n")
        offset = lo + nl + 1 if nl >= 0 else 0
        back += 1
    return offset, back


def read_buffer(sources: list[Source]) -> bytearray:
    """A read buffer of BLOCK bytes, or as large as the largest file (plus one, so a read that fills it
    means there is more): allocating 8 MiB was most of a view's cost on a small output."""
    largest = 0
    for src in sources:
        try:
            largest = max(largest, os.stat(src.path, follow_symlinks=False).st_size)
        except FileNotFoundError:
            pass
    return bytearray(min(BLOCK, max(4096, largest + 1 + (256 if any(s.gap for s in sources) else 0))))
