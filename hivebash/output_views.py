"""Views of a task's output files for the model: grep, a window of lines, what is new, the tail.

Every view reads the files in blocks (never whole: an output may be many GiB), cleans what it shows
(common.terminal_text: no escape sequences, last carriage-return frame) and fits in a byte budget, so an
answer that carries a view stays under 8 KiB however large the files are. Lines are numbered from 1 and
ended by `\\n`; a line longer than the block is searched in pieces (a match across the cut is missed).

grep runs near the speed of reading the file: each block is searched whole (one regex `search` from the
current position; re's literal-prefix search outran `bytes.find` here), and lines are counted with
`bytes.count`; Python only looks at the lines that match.
"""

from __future__ import annotations

import bisect
import os
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from common.terminal_text import readable

BLOCK = 8 << 20  # bytes read per system call by the scans
VIEW_BUDGET = 6 * 1024  # bytes of view text in one answer: the facts lines above it fit in the rest of 8 KiB
LINE_CAP = 400  # characters shown of one line; the rest is elided and counted
CONTEXT_MAX = 10
MAX_LINES_MAX = 500
GREP_SECONDS = 10.0  # a pattern that matches most lines of a huge file makes every line Python work: stop counting


class ViewError(ValueError):
    """A view argument the files cannot answer (the message names the field and the rule)."""


@dataclass(frozen=True)
class Source:
    """One output stream of a task: its name in answers (stdout/stderr) and its file."""

    stream: str
    path: str


@dataclass
class Line:
    stream: str
    number: int
    text: str  # cleaned and cut to LINE_CAP
    match: bool = True


@dataclass
class View:
    """A rendered view: the text for the model, the data for programs, and where each stream was read up to."""

    text: str
    data: dict
    read_to: dict[str, int] = field(default_factory=dict)  # stream -> byte offset shown up to (for new_only)


# ----- reading -------------------------------------------------------------------------------------------------


def _open(path: str) -> int | None:
    """The output file open for reading; None when it is missing, or when something else was planted there
    (a link: ELOOP; a FIFO: not waited on): its text must never reach the model (the task's note says why)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None


def _blocks(fd: int, start: int, buf: bytearray, stop: int | None = None):
    """(block, length, offset): blocks of whole lines from `start` to `stop` (default: the end of the file;
    the last piece may end without `\\n`; a line longer than the block comes in pieces). `block` is reused:
    use it before the next one is read."""
    view = memoryview(buf)
    offset = start
    while stop is None or offset < stop:
        n = os.preadv(fd, [view if stop is None else view[: min(len(buf), stop - offset)]], offset)
        if n <= 0:
            return
        end = n if n < len(buf) else (buf.rfind(b"\n", 0, n) + 1 or n)  # short: the end of the file or range
        yield buf, end, offset
        offset += end


def _shown(raw: bytes) -> str:
    text = readable(raw)
    if len(text) > LINE_CAP:
        text = f"{text[:LINE_CAP]}… ({len(text) - LINE_CAP} more characters)"
    return text


def _read_line_at(fd: int, offset: int) -> tuple[bytes, int]:
    """The line starting at `offset` (its first LINE_CAP*4 bytes) and the offset of the next line."""
    chunk = os.pread(fd, LINE_CAP * 4 + 1, offset)
    nl = chunk.find(b"\n")
    if nl >= 0:
        return chunk[:nl], offset + nl + 1
    if len(chunk) <= LINE_CAP * 4:
        return chunk, offset + len(chunk)
    nxt = _find_newline(fd, offset + len(chunk))
    return chunk[: LINE_CAP * 4], nxt


def _find_newline(fd: int, offset: int) -> int:
    """The offset just past the next `\\n` at or after `offset` (the file's end if none)."""
    while True:
        chunk = os.pread(fd, 1 << 16, offset)
        if not chunk:
            return offset
        nl = chunk.find(b"\n")
        if nl >= 0:
            return offset + nl + 1
        offset += len(chunk)


def _line_start_before(fd: int, offset: int, lines: int) -> tuple[int, int]:
    """Going back from the start of a line at `offset` over up to `lines` lines: (new offset, lines gone back)."""
    back = 0
    while back < lines and offset > 0:
        lo = max(0, offset - 1 - (1 << 16))
        chunk = os.pread(fd, offset - 1 - lo, lo)  # without the newline that ends the previous line
        nl = chunk.rfind(b"\n")
        while nl < 0 and lo > 0:  # a long line: keep going back
            lo2 = max(0, lo - (1 << 16))
            chunk = os.pread(fd, lo - lo2, lo2) + chunk
            lo = lo2
            nl = chunk.rfind(b"\n")
        offset = lo + nl + 1 if nl >= 0 else 0
        back += 1
    return offset, back


# ----- grep ----------------------------------------------------------------------------------------------------


@dataclass
class _Hit:
    stream: str
    number: int
    offset: int  # where the line starts


def compile_pattern(pattern: str) -> tuple[re.Pattern, re.Pattern]:
    """A Python regex applied to each line (`^` and `$` anchor at the line's ends), and the regex that finds
    candidates for it in a block. ASCII patterns run on the bytes; others on the decoded text (a non-ASCII
    character class must see characters)."""
    if not isinstance(pattern, str) or not pattern:
        raise ViewError("grep: must be a non-empty regular expression")
    source = pattern.encode() if pattern.isascii() else pattern
    try:
        regex = re.compile(source, re.MULTILINE)
    except re.error as exc:
        raise ViewError(f"grep: not a valid Python regular expression: {exc}") from None
    # A leading `^` hides a literal prefix from re's fast search (anchored patterns ran ~20x slower): the
    # pattern without it finds a superset of the lines, and each candidate line is checked with the full one.
    try:
        candidates = re.compile(source[1:], re.MULTILINE) if pattern.startswith("^") else regex
    except re.error:
        candidates = regex
    return regex, candidates


def _scan(fd: int, stream: str, regexes: tuple[re.Pattern, re.Pattern], start: int, keep: int, buf: bytearray,
          stop: int | None = None, count: bool = True):
    """Matching lines of one file from byte `start`: the first `keep` as hits (numbered afterwards, by
    `_number`: counting lines is as costly as searching, so it stops at the last hit kept), the total
    count, and the byte where counting stopped at the deadline (0: it read to the end). Without `count`, it
    stops at the `keep`th hit.

    The regex searches the whole block from the current position; a candidate counts only if its own line
    matches alone (`\\s` or `[^x]` can match across a newline)."""
    regex, candidates = regexes
    hits, total = [], 0
    last_hit = -1  # where the line of the last hit starts: the pieces of one long line count once
    carry = start  # where the line that the next block begins in starts
    as_text = isinstance(regex.pattern, str)
    newline = "\n" if as_text else b"\n"
    deadline = time.monotonic() + GREP_SECONDS
    for block, end, base in _blocks(fd, start, buf, stop):
        if time.monotonic() > deadline:
            return hits, total, base
        hay = bytes(block[:end]).decode("utf-8", "surrogateescape") if as_text else block
        hend = len(hay) if as_text else end
        pos, chars, nbytes = 0, 0, 0  # text only: a character offset and its byte offset
        while pos < hend:
            m = candidates.search(hay, pos, hend)
            if m is None:
                break
            at = m.start()
            ls = hay.rfind(newline, pos, at) + 1 or pos
            le = hay.find(newline, at, hend)
            le = hend if le < 0 else le
            if regex.search(hay, ls, le) is not None:
                if as_text:
                    nbytes += len(hay[chars:ls].encode("utf-8", "surrogateescape"))
                    chars = ls
                line_start = carry if ls == 0 else base + (nbytes if as_text else ls)
                if line_start != last_hit:
                    total += 1
                    last_hit = line_start
                    if len(hits) < keep:
                        hits.append(_Hit(stream, 0, line_start))
                    elif not count:
                        return hits, total, 0
            pos = le + 1
        nl = block.rfind(b"\n", 0, end)
        carry = base + nl + 1 if nl >= 0 else carry
    return hits, total, 0


def _number(fd: int, hits: list[_Hit], buf: bytearray) -> None:
    """Give each hit (in file order) its line number: newlines before it, plus one."""
    index = LineIndex.of(fd)
    pos, before = 0, 0
    for h in hits:
        pos, before = index.advance(fd, pos, before, h.offset, buf)
        h.number = before + 1
    index.save()


class LineIndex:
    """Where lines start in a file that has not changed since: (byte offset, newlines before it) pairs
    recorded by every count that read a whole block, so the next grep or window of the same output counts
    from the nearest one instead of from the start (counting lines is half the cost of a grep). Kept per
    file while its size and mtime stay the same (a task's output that is still written gets none)."""

    _cache: "OrderedDict[tuple[int, int], LineIndex]" = OrderedDict()
    _lock = threading.Lock()
    KEEP = 64  # files

    def __init__(self, key: tuple[int, int], stamp: tuple[int, int], points: list[tuple[int, int]]):
        self.key, self.stamp, self.points = key, stamp, points

    @classmethod
    def of(cls, fd: int) -> "LineIndex":
        st = os.fstat(fd)
        key, stamp = (st.st_dev, st.st_ino), (st.st_size, st.st_mtime_ns)
        with cls._lock:
            known = cls._cache.get(key)
            points = list(known.points) if known is not None and known.stamp == stamp else [(0, 0)]
        return cls(key, stamp, points)

    def save(self) -> None:
        if len(self.points) < 2:
            return
        with self._lock:
            self._cache.pop(self.key, None)
            self._cache[self.key] = self
            while len(self._cache) > self.KEEP:
                self._cache.popitem(last=False)

    def nearest(self, limit: int, by_lines: bool = False) -> tuple[int, int]:
        """The last point at or before byte `limit` (or with fewer than `limit` newlines before it)."""
        i = bisect.bisect_right(self.points, limit, key=(lambda p: p[1] + 1) if by_lines else (lambda p: p[0])) - 1
        return self.points[max(0, i)]

    def advance(self, fd: int, pos: int, before: int, target: int, buf: bytearray) -> tuple[int, int]:
        """From `pos` (with `before` newlines before it) to `target`: (target, newlines before it)."""
        point = self.nearest(target)
        if point[0] > pos:
            pos, before = point
        view = memoryview(buf)
        while pos < target:
            n = os.preadv(fd, [view[: min(len(buf), target - pos)]], pos)
            if n <= 0:
                break
            before += buf.count(b"\n", 0, n)
            pos += n
            if n == len(buf):
                self.add(pos, before)
        return pos, before

    def add(self, offset: int, before: int) -> None:
        if offset > self.points[-1][0]:
            self.points.append((offset, before))
        else:
            bisect.insort(self.points, (offset, before))


def grep(sources: list[Source], pattern: str, context: int = 0, starts: dict[str, int] | None = None,
         budget: int = VIEW_BUDGET) -> View:
    """Lines matching `pattern` in each source (from byte `starts[stream]`, default 0), with `context`
    lines around them, the first ones up to `budget` bytes, and how many more there are."""
    if isinstance(context, bool) or not isinstance(context, int) or not 0 <= context <= CONTEXT_MAX:
        raise ViewError(f"context: must be an integer from 0 to {CONTEXT_MAX}")
    regex = compile_pattern(pattern)
    buf = _buffer(sources)
    keep = budget // 16  # more hits than could ever be shown in the budget
    parts, data_streams, read_to = [], {}, {}
    used = 0
    for src in sources:
        fd = _open(src.path)
        if fd is None:
            data_streams[src.stream] = {"matches": 0, "shown": 0, "lines": []}
            continue
        try:
            start = (starts or {}).get(src.stream, 0)
            hits, total, stopped = _scan(fd, src.stream, regex, start, keep, buf)
            _number(fd, hits, buf)
            groups = _with_context(fd, hits, context)
            lines, shown_lines = _fit(groups, budget - used - 200, src.stream, context)
            read_to[src.stream] = os.fstat(fd).st_size
        finally:
            os.close(fd)
        body = "\n".join(lines)
        used += len(body.encode()) + 1
        shown = sum(1 for x in shown_lines if x.match)
        more = total - shown
        head = f"--- grep {pattern!r} in {src.stream}: {total} matching line{'s' if total != 1 else ''}"
        if more:
            head += f", first {shown} shown ({more} more: narrow the regex, or read around a line with from_line)"
        if stopped:
            head += f"; counting stopped after {GREP_SECONDS:g}s at byte {stopped} of {read_to[src.stream]}"
        parts.append(head + " ---" + ("\n" + body if body else ""))
        data_streams[src.stream] = {"matches": total, "shown": shown, "counted_to_byte": stopped or None,
                                    "lines": [vars(x) for x in shown_lines]}
    return View("\n".join(parts) + "\n", {"grep": pattern, "context": context, "streams": data_streams}, read_to)


def _with_context(fd: int, hits: list[_Hit], context: int) -> list[list[Line]]:
    """Groups of lines: each hit with `context` lines before and after, overlapping groups merged."""
    groups: list[list[Line]] = []
    hit_numbers = {h.number for h in hits}
    last_shown = 0  # number of the last line already in a group
    for h in hits:
        if h.number <= last_shown:
            continue
        offset, back = _line_start_before(fd, h.offset, context)
        number = h.number - back
        if number <= last_shown:  # overlaps the previous group: continue it
            skip = last_shown - number + 1
            for _ in range(skip):
                _, offset = _read_line_at(fd, offset)
            number = last_shown + 1
            group = groups[-1]
        else:
            group = []
            groups.append(group)
        stop = h.number + context
        while number <= stop:
            raw, nxt = _read_line_at(fd, offset)
            if nxt == offset:
                break
            if number > h.number and number in hit_numbers:
                stop = number + context  # a later hit inside the context extends the group
            group.append(Line(h.stream, number, _shown(raw), number in hit_numbers))
            offset, number = nxt, number + 1
        last_shown = number - 1
    return groups


def _fit(groups: list[list[Line]], budget: int, stream: str, context: int) -> tuple[list[str], list[Line]]:
    """Render groups grep-style (`stdout:12: match`, `stdout:11- context`, `--` between groups with context)
    while they fit in `budget` bytes; returns the rendered lines and the lines they show."""
    rendered_all, shown, used = [], [], 0
    for i, group in enumerate(groups):
        rendered = (["--"] if i and context else []) + [f"{stream}:{x.number}{':' if x.match else '-'} {x.text}" for x in group]
        size = sum(len(r.encode()) + 1 for r in rendered)
        if used + size > budget:
            break
        rendered_all += rendered
        shown += group
        used += size
    return rendered_all, shown


# ----- a window of lines ---------------------------------------------------------------------------------------


def _offset_of_line(fd: int, line: int, buf: bytearray) -> int | None:
    """Byte offset where line `line` (1-based) starts, or None if the file has fewer lines."""
    if line == 1:
        return 0
    index = LineIndex.of(fd)
    offset, passed = index.nearest(line - 1, by_lines=True)
    need = line - 1 - passed  # newlines still to pass
    view = memoryview(buf)
    try:
        while True:
            n = os.preadv(fd, [view], offset)
            if n <= 0:
                return None
            count = buf.count(b"\n", 0, n)
            if count < need:
                need -= count
                offset += n
                if n == len(buf):
                    index.add(offset, line - 1 - need)
                continue
            lo, hi = 0, n  # narrow to the range holding the need-th newline, then walk it
            while hi - lo > 4096:
                mid = (lo + hi) // 2
                c = buf.count(b"\n", lo, mid)
                if c >= need:
                    hi = mid
                else:
                    need -= c
                    lo = mid
            pos = lo - 1
            for _ in range(need):
                pos = buf.find(b"\n", pos + 1, hi)
            start = offset + pos + 1
            return start if start < offset + n or os.fstat(fd).st_size > start else None
    finally:
        index.save()


def _buffer(sources: list[Source]) -> bytearray:
    """A read buffer of BLOCK bytes, or as large as the largest file (plus one, so a read that fills it
    means there is more): allocating 8 MiB was most of a view's cost on a small output."""
    largest = 0
    for src in sources:
        try:
            largest = max(largest, os.stat(src.path, follow_symlinks=False).st_size)
        except FileNotFoundError:
            pass
    return bytearray(min(BLOCK, max(4096, largest + 1)))


def window(sources: list[Source], from_line: int, max_lines: int, budget: int = VIEW_BUDGET) -> View:
    """Lines `from_line` .. `from_line + max_lines - 1` of each source, numbered, cut to `budget`."""
    if isinstance(from_line, bool) or not isinstance(from_line, int) or from_line < 1:
        raise ViewError("from_line: must be an integer >= 1 (the first line is 1)")
    if isinstance(max_lines, bool) or not isinstance(max_lines, int) or not 1 <= max_lines <= MAX_LINES_MAX:
        raise ViewError(f"max_lines: must be an integer from 1 to {MAX_LINES_MAX}")
    buf = _buffer(sources)
    parts, data = [], {}
    share = budget // max(1, len(sources))
    for src in sources:
        fd = _open(src.path)
        lines: list[Line] = []
        more = False
        offset = None if fd is None else _offset_of_line(fd, from_line, buf)
        try:
            used = 0
            while offset is not None and len(lines) < max_lines:
                raw, nxt = _read_line_at(fd, offset)
                if nxt == offset:
                    break
                line = Line(src.stream, from_line + len(lines), _shown(raw))
                size = len(line.text.encode()) + 12
                if used + size > share - 200:
                    more = True
                    break
                lines.append(line)
                used += size
                offset = nxt
            if offset is not None and not more and fd is not None:
                more = bool(os.pread(fd, 1, offset))
        finally:
            if fd is not None:
                os.close(fd)
        if not lines:
            head = f"--- {src.stream}: no line {from_line} (the output has fewer lines) ---"
        else:
            last = lines[-1].number
            head = f"--- {src.stream} lines {from_line}-{last}"
            head += f" (more follow: from_line={last + 1}) ---" if more else " (the end of the output) ---"
        parts.append("\n".join([head] + [f"{x.number}: {x.text}" for x in lines]))
        data[src.stream] = {"from_line": from_line, "lines": [vars(x) for x in lines], "more": more}
    return View("\n".join(parts) + "\n", {"from_line": from_line, "max_lines": max_lines, "streams": data})


# ----- the end of the output, or what is new ------------------------------------------------------------------


def _tail_bytes(fd: int, start: int, size: int, share: int) -> tuple[bytes, int]:
    """The last bytes of [start, size) whose readable text fits in `share` bytes, and where they begin."""
    first = max(start, size - share)
    raw = os.pread(fd, size - first, first)
    while True:
        if first > start:  # cut inside a character: skip its continuation bytes
            skip = 0
            while skip < min(3, len(raw)) and raw[skip] & 0xC0 == 0x80:
                skip += 1
            raw, first = raw[skip:], first + skip
            nl = raw.find(b"\n", 0, LINE_CAP)  # and the rest of a line cut at its start
            if 0 <= nl < len(raw) - 1:
                raw, first = raw[nl + 1:], first + nl + 1
        text = readable(raw)
        grown = len(text.encode())
        if grown <= share:
            return text, first
        cut = len(raw) - len(raw) * share // grown + 1  # escapes made it longer than the bytes it shows
        raw, first = raw[cut:], first + cut


def tail(sources: list[Source], starts: dict[str, int] | None = None, budget: int = VIEW_BUDGET,
         cap: int | None = None) -> View:
    """The end of each source, cleaned, within `budget` bytes in all; with `starts`, only what lies after
    `starts[stream]` (what the reader has not been shown: new_only). Empty streams leave their share to
    the others. `cap`: at most that many bytes of any one stream (the daemon's --tail-bytes)."""
    sizes = {}
    for src in sources:
        try:
            sizes[src.stream] = os.stat(src.path, follow_symlinks=False).st_size
        except FileNotFoundError:
            sizes[src.stream] = 0
    begin = {s.stream: min((starts or {}).get(s.stream, 0), sizes[s.stream]) for s in sources}
    shares, left = {}, budget - 160 * len(sources)
    by_need = sorted(sources, key=lambda s: sizes[s.stream] - begin[s.stream])
    for i, src in enumerate(by_need):  # a short stream leaves the rest of its share to the longer one
        # (text: an escaped byte takes up to 4 bytes of it)
        shares[src.stream] = min(4 * (sizes[src.stream] - begin[src.stream]), left // (len(by_need) - i),
                                 cap if cap is not None else budget)
        left -= shares[src.stream]
    parts, data, read_to = [], {}, {}
    for src in sources:
        size, start = sizes[src.stream], begin[src.stream]
        text, first = "", size
        fd = _open(src.path) if size > start else None
        if fd is not None:
            try:
                text, first = _tail_bytes(fd, start, size, shares[src.stream])
            finally:
                os.close(fd)
        read_to[src.stream] = size
        new = f"new since byte {start}: " if starts is not None else ""
        if not text:
            head = (f"--- {src.stream}: nothing new ({size} bytes, {src.path}) ---" if starts is not None
                    else f"--- {src.stream}: empty ---")
        elif first > start:
            head = (f"--- {src.stream}: {new}last {size - first} of {size - start} bytes ({first - start} elided: "
                    f"grep or from_line read them; file {src.path}) ---")
        else:
            head = f"--- {src.stream}: {new}{size - start} bytes ({src.path}) ---"
        body = text if not text or text.endswith("\n") else text + "\n(no newline at end)\n"
        parts.append(head + "\n" + body)
        data[src.stream] = {"path": src.path, "size": size, "from_byte": start, "text": text,
                            "elided_bytes": max(0, first - start)}
    return View("".join(parts), {"streams": data}, read_to)


# ----- wait_for: the first new line that matches ---------------------------------------------------------------


@dataclass
class Watch:
    """Follows one output file from a byte offset for lines matching a regex (status/run `wait_for`): only
    complete lines count (a line still being written might match only once it is whole), unless `final`."""

    source: Source
    offset: int
    regexes: tuple[re.Pattern, re.Pattern]
    buf: bytearray = field(default_factory=lambda: bytearray(1 << 16))

    def check(self, final: bool = False) -> Line | None:
        """The first matching line written since the last check, or None; moves past what it read."""
        fd = _open(self.source.path)
        if fd is None:
            return None
        try:
            size = os.fstat(fd).st_size
            stop = size if final else self._last_line_end(fd, size)
            if stop <= self.offset:
                return None
            hits, _, _ = _scan(fd, self.source.stream, self.regexes, self.offset, 1, self.buf, stop, count=False)
            if not hits:
                self.offset = stop
                return None
            _number(fd, hits, self.buf)
            number = hits[0].number
            raw, self.offset = _read_line_at(fd, hits[0].offset)
            return Line(self.source.stream, number, _shown(raw))
        finally:
            os.close(fd)
        return None

    def _last_line_end(self, fd: int, size: int) -> int:
        """Offset just past the last newline before `size` (at or after self.offset)."""
        lo = size
        while lo > self.offset:
            start = max(self.offset, lo - (1 << 16))
            nl = os.pread(fd, lo - start, start).rfind(b"\n")
            if nl >= 0:
                return start + nl + 1
            lo = start
        return self.offset


def watch(source: Source, pattern: str, from_end: bool = True) -> Watch:
    """A Watch of `source` for `pattern`, from the file's current end (only new lines) or its start."""
    regexes = compile_pattern(pattern)
    try:
        size = os.stat(source.path, follow_symlinks=False).st_size if from_end else 0
    except FileNotFoundError:
        size = 0
    return Watch(source, size, regexes)


# ----- what a status asks to see --------------------------------------------------------------------------------

STREAMS = ("stdout", "stderr")
DEFAULT_MAX_LINES = 40


@dataclass(frozen=True)
class ViewRequest:
    """The view a `status` asks for (checked): at most one of grep / from_line / new_only; stream for any."""

    grep: str | None = None
    context: int = 0
    from_line: int | None = None
    max_lines: int = DEFAULT_MAX_LINES
    stream: str | None = None
    new_only: bool = False

    @property
    def moves_cursor(self) -> bool:
        """Tails and new_only show the end of the output: the agent has then seen it up to there."""
        return self.grep is None and self.from_line is None

    def streams(self) -> tuple[str, ...]:
        return (self.stream,) if self.stream else STREAMS


def check_view(grep: object = None, context: object = None, from_line: object = None, max_lines: object = None,
               stream: object = None, new_only: object = None) -> ViewRequest:
    """A ViewRequest, or a ViewError naming the field and the rule."""
    if stream is not None and stream not in STREAMS:
        raise ViewError('stream: must be "stdout" or "stderr" (omit it for both)')
    if new_only is not None and not isinstance(new_only, bool):
        raise ViewError("new_only: must be true or false")
    chosen = [name for name, value in (("grep", grep), ("from_line", from_line), ("new_only", new_only or None))
              if value is not None]
    if len(chosen) > 1:
        raise ViewError(f"{chosen[1]}: cannot be combined with {chosen[0]} (one view per call)")
    if context is not None and grep is None:
        raise ViewError("context: goes with grep (lines around each match)")
    if max_lines is not None and from_line is None:
        raise ViewError("max_lines: goes with from_line (the window's length)")
    if grep is not None:
        compile_pattern(grep)
    context = 0 if context is None else context
    if isinstance(context, bool) or not isinstance(context, int) or not 0 <= context <= CONTEXT_MAX:
        raise ViewError(f"context: must be an integer from 0 to {CONTEXT_MAX}")
    max_lines = DEFAULT_MAX_LINES if max_lines is None else max_lines
    if isinstance(max_lines, bool) or not isinstance(max_lines, int) or not 1 <= max_lines <= MAX_LINES_MAX:
        raise ViewError(f"max_lines: must be an integer from 1 to {MAX_LINES_MAX}")
    if from_line is not None and (isinstance(from_line, bool) or not isinstance(from_line, int) or from_line < 1):
        raise ViewError("from_line: must be an integer >= 1 (the first line is 1)")
    return ViewRequest(grep, context, from_line, max_lines, stream, bool(new_only))


def render(sources: list[Source], request: ViewRequest, seen_to: dict[str, int] | None = None,
           budget: int = VIEW_BUDGET, tail_cap: int | None = None) -> View:
    """The view `request` asks for over `sources` (already narrowed to its streams). `seen_to`: where the
    agent was shown each stream up to (for new_only)."""
    if request.grep is not None:
        return grep(sources, request.grep, request.context, budget=budget)
    if request.from_line is not None:
        return window(sources, request.from_line, request.max_lines, budget=budget)
    return tail(sources, starts=dict(seen_to or {}) if request.new_only else None, budget=budget, cap=tail_cap)
