"""grep over output files: the matching lines with context, numbered, within a byte budget.

grep runs near the speed of reading the file: each block is searched whole (one regex `search` from the
current position; re's literal-prefix search outran `bytes.find` here), and lines are counted with
`bytes.count`; Python only looks at the lines that match. A line longer than the block is searched in
pieces (a match across the cut is missed).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from hivebash.output_views.kept import gap_note
from hivebash.output_views.line_index import number_hits
from hivebash.output_views.reading import (
    CONTEXT_MAX,
    GREP_SECONDS,
    VIEW_BUDGET,
    Line,
    OutputFile,
    Source,
    View,
    ViewError,
    blocks,
    line_start_before,
    open_output,
    read_buffer,
    read_line_at,
    shown_text,
)


@dataclass
class Hit:
    stream: str
    number: int
    offset: int  # where the line starts


def compile_pattern(pattern: object) -> tuple[re.Pattern[Any], re.Pattern[Any]]:
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


def scan(f: OutputFile, stream: str, regexes: tuple[re.Pattern, re.Pattern], start: int, keep: int, buf: bytearray,
          stop: int | None = None, count: bool = True, fold: bool = False):
    """Matching lines of one file from byte `start`: the first `keep` as hits (numbered afterwards, by
    `number_hits`: counting lines is as costly as searching, so it stops at the last hit kept), the total
    count, and the byte where counting stopped at the deadline (0: it read to the end). Without `count`, it
    stops at the `keep`th hit.

    The regex searches the whole block from the current position; a candidate counts only if its own line
    matches alone (`\\s` or `[^x]` can match across a newline). With `fold` (a lower-case bytes pattern) each
    block is searched lower-cased: ASCII case folds in place, offsets stay, and re's case-insensitive search
    is ~8x slower than a plain one."""
    regex, candidates = regexes
    hits: list[Hit] = []
    total = 0
    last_hit = -1  # where the line of the last hit starts: the pieces of one long line count once
    carry = start  # where the line that the next block begins in starts
    as_text = isinstance(regex.pattern, str)
    newline: Any = "\n" if as_text else b"\n"  # str or bytes, as the pattern and the haystack are
    deadline = time.monotonic() + GREP_SECONDS
    for block, end, base in blocks(f, start, buf, stop):
        if time.monotonic() > deadline:
            return hits, total, base
        hay: Any = (bytes(block[:end]).decode("utf-8", "surrogateescape") if as_text else
                    bytes(block[:end]).lower() if fold else block)
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
                        hits.append(Hit(stream, 0, line_start))
                    elif not count:
                        return hits, total, 0
            pos = le + 1
        nl = block.rfind(b"\n", 0, end)
        carry = base + nl + 1 if nl >= 0 else carry
    return hits, total, 0


def grep(sources: list[Source], pattern: str, context: int = 0, starts: dict[str, int] | None = None,
         budget: int = VIEW_BUDGET) -> View:
    """Lines matching `pattern` in each source (from byte `starts[stream]`, default 0), with `context`
    lines around them, the first ones up to `budget` bytes, and how many more there are."""
    if isinstance(context, bool) or not isinstance(context, int) or not 0 <= context <= CONTEXT_MAX:
        raise ViewError(f"context: must be an integer from 0 to {CONTEXT_MAX}")
    regex = compile_pattern(pattern)
    buf = read_buffer(sources)
    keep = budget // 16  # more hits than could ever be shown in the budget
    parts, data_streams, read_to = [], {}, {}
    used = 0
    for src in sources:
        f = open_output(src)
        if f is None:
            data_streams[src.stream] = {"matches": 0, "shown": 0, "lines": []}
            continue
        try:
            start = f.logical((starts or {}).get(src.stream, 0))
            hits, total, stopped = scan(f, src.stream, regex, start, keep, buf)
            number_hits(f, hits, buf)
            groups = _with_context(f, hits, context)
            lines, shown_lines = _fit(groups, budget - used - 200, src.stream, context)
            read_to[src.stream] = f.stamp().st_size
            gap = gap_note(f)
        finally:
            f.close()
        body = "\n".join(lines)
        used += len(body.encode()) + 1
        shown = sum(1 for x in shown_lines if x.match)
        more = total - shown
        head = f"--- grep {pattern!r} in {src.stream}: {total} matching line{'s' if total != 1 else ''}"
        if more:
            head += f", first {shown} shown ({more} more: narrow the regex, or read around a line with from_line)"
        if stopped:
            head += f"; counting stopped after {GREP_SECONDS:g}s at byte {f.physical(stopped)} of {read_to[src.stream]}"
        head += gap
        parts.append(head + " ---" + ("\n" + body if body else ""))
        data_streams[src.stream] = {"matches": total, "shown": shown, "counted_to_byte": stopped or None,
                                    "lines": [vars(x) for x in shown_lines]}
    return View("\n".join(parts) + "\n", {"grep": pattern, "context": context, "streams": data_streams}, read_to)


def _with_context(f: OutputFile, hits: list[Hit], context: int) -> list[list[Line]]:
    """Groups of lines: each hit with `context` lines before and after, overlapping groups merged."""
    groups: list[list[Line]] = []
    hit_numbers = {h.number for h in hits}
    last_shown = 0  # number of the last line already in a group
    for h in hits:
        if h.number <= last_shown:
            continue
        offset, back = line_start_before(f, h.offset, context)
        number = h.number - back
        if number <= last_shown:  # overlaps the previous group: continue it
            skip = last_shown - number + 1
            for _ in range(skip):
                _, offset = read_line_at(f, offset)
            number = last_shown + 1
            group = groups[-1]
        else:
            group = []
            groups.append(group)
        stop = h.number + context
        while number <= stop:
            raw, nxt = read_line_at(f, offset)
            if nxt == offset:
                break
            if number > h.number and number in hit_numbers:
                stop = number + context  # a later hit inside the context extends the group
            group.append(Line(h.stream, number, shown_text(raw, nxt - offset), number in hit_numbers,
                              f.after_gap(number)))
            offset, number = nxt, number + 1
        last_shown = number - 1
    return groups


def _fit(groups: list[list[Line]], budget: int, stream: str, context: int) -> tuple[list[str], list[Line]]:
    """Render groups grep-style (`stdout:12: match`, `stdout:11- context`, `--` between groups with context)
    while they fit in `budget` bytes; returns the rendered lines and the lines they show."""
    rendered_all, shown, used = [], [], 0
    for i, group in enumerate(groups):
        rendered = (["--"] if i and context else []) + [f"{stream}:{x.label}{':' if x.match else '-'} {x.text}"
                                                        for x in group]
        size = sum(len(r.encode()) + 1 for r in rendered)
        if used + size > budget:
            break
        rendered_all += rendered
        shown += group
        used += size
    return rendered_all, shown
