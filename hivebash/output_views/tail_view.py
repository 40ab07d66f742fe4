"""The end of output files (optionally its last N lines), or what the agent was not shown yet (new_only),
with line numbers in every header.

What an answer shows moves the agent's cursor (`View.read_to`) only over what it showed: a tail that skipped
part of the unseen output leaves the cursor where it was, so `new_only` still delivers the skipped lines.
`new_only` shows the unseen output from its start, as much as fits, and says which lines are left and the
call that shows them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from common.humanize import human_bytes
from hivebash.output_views.kept import Gap, OutputFile
from hivebash.output_views.line_count import line_total, newlines_before, remember
from hivebash.output_views.reading import LINE_CAP, VIEW_BUDGET, Source, View, open_output
from hivebash.output_views.terminal_text import readable


def count(n: int) -> str:
    return f"{n:,}"


def lines_text(n: int) -> str:
    return f"{n:,} line{'' if n == 1 else 's'}"


def span_text(first: int, last: int) -> str:
    return f"line {first:,}" if first == last else f"lines {first:,}-{last:,}"


def size_text(n: int) -> str:
    return f"{n} bytes" if n < 1024 else human_bytes(n)


def _skip_partial(raw: bytes, first: int) -> tuple[bytes, int]:
    """Drop a character cut at the start of `raw`, then the rest of the line cut there."""
    skip = 0
    while skip < min(3, len(raw)) and raw[skip] & 0xC0 == 0x80:
        skip += 1
    raw, first = raw[skip:], first + skip
    nl = raw.find(b"\n", 0, LINE_CAP)
    if 0 <= nl < len(raw) - 1:
        raw, first = raw[nl + 1:], first + nl + 1
    return raw, first


def _tail_bytes(f: OutputFile, start: int, size: int, share: int) -> tuple[bytes, str, int]:
    """The last bytes of [start, size) whose readable text fits in `share` bytes: (raw, text, where they begin)."""
    first = max(start, size - share)
    raw = f.pread(size - first, first)
    while True:
        if first > start:
            raw, first = _skip_partial(raw, first)
        text = readable(raw)
        grown = len(text.encode())
        if grown <= share:
            return raw, text, first
        cut = len(raw) - len(raw) * share // grown + 1  # escapes made it longer than the bytes it shows
        raw, first = raw[cut:], first + cut


def _head_bytes(f: OutputFile, start: int, size: int, share: int) -> tuple[bytes, str, int]:
    """The first whole lines of [start, size) whose readable text fits in `share`: (raw, text, where they end).
    A single line longer than the share is cut (the rest stays unseen)."""
    raw = f.pread(min(size - start, share), start)
    while True:
        if start + len(raw) < size:
            nl = raw.rfind(b"\n")
            if nl >= 0:
                raw = raw[:nl + 1]
        text = readable(raw)
        grown = len(text.encode())
        if grown <= share or len(raw) <= 1:
            return raw, text, start + len(raw)
        raw = raw[: len(raw) * share // grown]


def _last_lines_start(f: OutputFile, size: int, lines: int) -> int:
    """Where the last `lines` lines of the file begin (a final newline ends the last line, not a new one)."""
    pos = size
    wanted = lines + 1 if size and f.pread(1, size - 1) == b"\n" else lines
    while pos > 0:
        lo = max(0, pos - (1 << 16))
        chunk = f.pread(pos - lo, lo)
        at = len(chunk)
        while wanted:
            at = chunk.rfind(b"\n", 0, at)
            if at < 0:
                break
            wanted -= 1
            if not wanted:
                return lo + at + 1
        pos = lo
    return 0


@dataclass
class _Shown:
    """One stream's part of a tail view."""

    size: int
    start: int  # where the unseen output starts (new_only), else 0
    first: int  # the first byte shown
    end: int  # just past the last byte shown
    raw: bytes
    text: str
    before: int | None  # newlines before `first` (None: not counted in time)
    newlines: int | None  # newlines in the whole file
    ends_nl: bool = True  # the file ends with a newline (its last line is whole)
    seen_to: int = 0  # the file offset the agent has seen up to once this is shown (View.read_to)
    written: int = 0  # the file's size: bytes written in all (`size` is the kept text's, kept.py)
    gap: Gap | None = field(default=None)  # the dropped middle
    gap_line: int | None = None  # the number of its marker line (kept.OutputFile.gap_line)

    def label(self, number: int) -> str:
        """A line number as the header shows it: `~N` after the gap (counted from it)."""
        return f"~{number:,}" if self.gap_line is not None and number > self.gap_line else f"{number:,}"

    @property
    def first_line(self) -> int | None:
        return None if self.before is None else self.before + 1

    @property
    def last_line(self) -> int | None:
        if self.before is None:
            return None
        return self.before + self.raw.count(b"\n") + (0 if self.raw.endswith(b"\n") else 1)

    def total(self, ends_with_newline: bool) -> int | None:
        return None if self.newlines is None else line_total(self.newlines, self.size, ends_with_newline)


_NOTHING = _Shown(0, 0, 0, 0, b"", "", 0, 0)  # an empty stream (an empty file has no cursor past 0)


def _read(src: Source, size: int, cursor: int, share: int, new_only: bool, lines: int | None) -> _Shown:
    """One stream's part: `size` and `cursor` are file offsets (the file's size, where the agent's unseen
    output starts); what is shown is read from the kept text (kept.py)."""
    if not size:
        return _NOTHING
    start = cursor if new_only else 0
    f = open_output(src)
    if f is None:  # gone, or not our file (reading.open_output): nothing of it is shown or counted
        return _Shown(size, start, size, size, b"", "", None, None, seen_to=size if size <= cursor else cursor,
                      written=size)
    try:
        written, size, start, at = size, f.logical(size), f.logical(start), f.logical(cursor)
        shown = _shown(f, size, start, share, new_only, lines)
        shown.written, shown.gap, shown.gap_line = written, f.gap, f.gap_line()
        shown.seen_to = f.physical(shown.end) if shown.first <= at else cursor
        return shown
    finally:
        f.close()


def _shown(f: OutputFile, size: int, start: int, share: int, new_only: bool, lines: int | None) -> _Shown:
    """The part shown of the kept text [start, size) (see `_read`)."""
    if new_only:
        raw, text, end = _head_bytes(f, start, size, share) if size > start else (b"", "", size)
        first = start
    else:
        begin = _last_lines_start(f, size, lines) if lines else 0
        raw, text, first = _tail_bytes(f, begin, size, share)
        end = size
    st = f.stamp()
    before = 0 if first == 0 else newlines_before(f, first, st)
    newlines: int | None
    if before is not None and end == size:
        newlines = before + raw.count(b"\n")
        if first:  # a file read whole needs no count kept: the next view reads it whole again
            remember(f, size, newlines, st)
    else:
        newlines = newlines_before(f, size, st)
    ends_nl = raw.endswith(b"\n") if end == size and raw else f.pread(1, size - 1) == b"\n"
    return _Shown(size, start, first, end, raw, text, before, newlines, ends_nl)


def _lines_text(shown: _Shown) -> str:
    total = shown.total(shown.ends_nl)
    if total is None:
        return ""
    return f"{'~' if shown.gap is not None else ''}{lines_text(total)}, "


def _size(s: _Shown) -> str:
    """The file's size; with a dropped middle, what was written and what is kept, and how numbers count (the
    limit it passed is the answer's `output:` line, kept.passed_line)."""
    if s.gap is None:
        return size_text(s.size)
    return (f"{size_text(s.written)} written, {size_text(s.written - s.gap.dropped)} kept "
            f"({size_text(s.gap.dropped)} dropped from the middle; line numbers marked ~ are counted from the gap)")


def _span(s: _Shown, first: int, last: int) -> str:
    return f"line {s.label(first)}" if first == last else f"lines {s.label(first)}-{s.label(last)}"


def _head(stream: str, s: _Shown, new_only: bool, was: int | None, again: str) -> str:
    if not new_only and not s.size:  # most streams of most tasks: nothing to count
        return f"--- {stream}: empty ---"
    cut = f"truncated (was {was} bytes when last shown, now {s.written}); " if was is not None else ""
    lines = _lines_text(s)
    total = s.total(s.ends_nl)
    if not new_only:
        if s.first == 0:
            return f"--- {stream}: {lines}{_size(s)} ---"
        shown_lines = (s.last_line or 0) - (s.first_line or 0) + 1 if s.text else 0
        first_line, last_line = s.first_line, s.last_line
        where = (f" ({_span(s, first_line, last_line)})" if first_line is not None and last_line is not None
                 and s.text else "")
        return (f"--- {stream}: {lines}{_size(s)}; last {count(shown_lines)} shown{where}; "
                f"from_line or grep read the rest ---")
    if not s.text:
        return f"--- {stream}: {cut}nothing new ({lines}{_size(s)} in all) ---" if s.size else \
            f"--- {stream}: {cut}nothing new (empty) ---"
    first_line, last_line = s.first_line, s.last_line
    span = (f"new {_span(s, first_line, last_line)}" if first_line is not None and last_line is not None
            else f"new from byte {s.first}")
    if s.end >= s.size:
        return f"--- {stream}: {cut}{span} ({size_text(s.end - s.start)} new; {lines}{_size(s)} in all) ---"
    next_line = (s.last_line or 0) + (1 if s.raw.endswith(b"\n") else 0)
    left = (_span(s, next_line, total)
            if total is not None and s.last_line is not None else f"bytes {s.end}-{s.size}")
    return (f"--- {stream}: {cut}{span} shown; {left} ({size_text(s.size - s.end)}) not shown yet: "
            f"{again} shows the next ---")


def _read_all(sources: list[Source], sizes: dict[str, int], cursor: dict[str, int], new_only: bool, budget: int,
              cap: int | None, lines: int | None) -> dict[str, _Shown]:
    """Each stream's part, within `budget` bytes in all."""
    begin = {s.stream: cursor[s.stream] if new_only else 0 for s in sources}
    shares, left = {}, budget - 200 * len(sources)
    by_need = sorted(sources, key=lambda s: sizes[s.stream] - begin[s.stream])
    for i, src in enumerate(by_need):  # a short stream leaves the rest of its share to the longer one
        # (text: an escaped byte takes up to 4 bytes of it)
        shares[src.stream] = min(4 * (sizes[src.stream] - begin[src.stream]), left // (len(by_need) - i),
                                 cap if cap is not None else budget)
        left -= shares[src.stream]
    return {src.stream: _read(src, sizes[src.stream], cursor[src.stream], max(shares[src.stream], 1), new_only,
                              lines) for src in sources}


def tail(sources: list[Source], cursors: dict[str, int] | None = None, new_only: bool = False,
         budget: int = VIEW_BUDGET, cap: int | None = None, lines: int | None = None,
         again: str = "new_only=true again") -> View:
    """The end of each source (its last `lines` lines, if given), cleaned, within `budget` bytes in all; with
    `new_only`, what lies after `cursors[stream]` (what the reader was not shown), from its start. Empty
    streams leave their share to the others. `cap`: at most that many bytes of any one stream (the daemon's
    --tail-bytes). `again`: the call that shows more of what is new."""
    cursors = cursors or {}
    sizes = {}
    for src in sources:
        try:
            sizes[src.stream] = src.size if src.size is not None else os.stat(src.path, follow_symlinks=False).st_size
        except FileNotFoundError:
            sizes[src.stream] = 0
    truncated = {s.stream for s in sources if cursors.get(s.stream, 0) > sizes[s.stream]}
    cursor = {s.stream: 0 if s.stream in truncated else cursors.get(s.stream, 0) for s in sources}
    if new_only or any(sizes.values()):
        shown = _read_all(sources, sizes, cursor, new_only, budget, cap, lines)
    else:  # most views of most tasks: nothing printed, nothing to read
        shown = dict.fromkeys(sizes, _NOTHING)
    parts, data, read_to = [], {}, {}
    for src in sources:
        size = sizes[src.stream]
        s = shown[src.stream]
        # The cursor moves over what was shown, when what was shown starts where the unseen output does.
        read_to[src.stream] = s.seen_to
        was = cursors.get(src.stream) if src.stream in truncated else None
        head = _head(src.stream, s, new_only, was, again)
        body = s.text if not s.text or s.text.endswith("\n") else s.text + "\n(no newline at end)\n"
        parts.append(head + "\n" + body)
        data[src.stream] = {"path": src.path, "size": size, "from_byte": cursor[src.stream] if new_only else 0,
                            "text": s.text, "shown_bytes": len(s.raw),
                            "elided_bytes": max(0, s.first - s.start) + (s.size - s.end),
                            "truncated": src.stream in truncated, "lines": s.total(s.ends_nl),
                            "first_line": s.first_line if s.text else None,
                            "last_line": s.last_line if s.text else None}
        if s.gap is not None:
            data[src.stream]["dropped"] = {"from_byte": s.gap.start, "to_byte": s.gap.end, "bytes": s.gap.dropped,
                                           "kept_bytes": size - s.gap.dropped, "limit": s.gap.limit,
                                           "numbers_from_gap_after_line": s.gap_line}
    return View("".join(parts), {"streams": data}, read_to)
