"""A window of numbered lines of output files (`from_line`, `max_lines`; a negative `from_line` counts from
the end, so `max_lines` alone reads the last lines), within a byte budget. Headers say how many lines there are."""

from __future__ import annotations

from hivebash.output_views.kept import OutputFile, gap_note
from hivebash.output_views.line_count import line_total, newlines_before
from hivebash.output_views.line_index import offset_of_line
from hivebash.output_views.reading import (
    MAX_LINES_MAX,
    VIEW_BUDGET,
    Line,
    Source,
    View,
    ViewError,
    open_output,
    read_buffer,
    read_line_at,
    shown_text,
)
from hivebash.output_views.tail_view import count, lines_text


def _total_lines(f: OutputFile) -> int | None:
    size = f.size()
    before = newlines_before(f, size)
    if before is None:
        return None
    return line_total(before, size, size == 0 or f.pread(1, size - 1) == b"\n")


def _number(line: Line) -> str:
    return ("~" if line.from_gap else "") + count(line.number)


def window(sources: list[Source], from_line: int, max_lines: int, budget: int = VIEW_BUDGET) -> View:
    """Lines `from_line` .. `from_line + max_lines - 1` of each source, numbered, cut to `budget`; a negative
    `from_line` is counted from the end (-1 is the last line)."""
    if isinstance(from_line, bool) or not isinstance(from_line, int) or from_line == 0:
        raise ViewError("from_line: must be a non-zero integer (the first line is 1; -20 starts 20 lines from the end)")
    if isinstance(max_lines, bool) or not isinstance(max_lines, int) or not 1 <= max_lines <= MAX_LINES_MAX:
        raise ViewError(f"max_lines: must be an integer from 1 to {MAX_LINES_MAX}")
    buf = read_buffer(sources)
    parts, data = [], {}
    share = budget // max(1, len(sources))
    for src in sources:
        f = open_output(src)
        lines: list[Line] = []
        more = False
        total = None if f is None else _total_lines(f)
        first = from_line if from_line > 0 or total is None else max(1, total + from_line + 1)
        offset = None if f is None or (from_line < 0 and total is None) else offset_of_line(f, first, buf)
        gap_line, gap = (f.gap_line(), gap_note(f)) if f is not None else (None, "")
        try:
            used = 0
            while f is not None and offset is not None and len(lines) < max_lines:
                raw, nxt = read_line_at(f, offset)
                if nxt == offset:
                    break
                number = first + len(lines)
                line = Line(src.stream, number, shown_text(raw, nxt - offset), from_gap=f.after_gap(number))
                size = len(line.text.encode()) + 12
                if used + size > share - 200:
                    more = True
                    break
                lines.append(line)
                used += size
                offset = nxt
            if offset is not None and not more and f is not None:
                more = bool(f.pread(1, offset))
        finally:
            if f is not None:
                f.close()
        of = f" of {'~' if gap_line else ''}{count(total)}" if total is not None else ""
        if not lines:
            has = f"the output has {lines_text(total)}" if total is not None else "the output has fewer lines"
            head = (f"--- {src.stream}: no line {count(first)} ({has}; max_lines alone reads the last ones) ---"
                    if total else f"--- {src.stream}: no lines (the output is empty) ---")
        else:
            last = lines[-1].number
            head = f"--- {src.stream} lines {_number(lines[0])}-{_number(lines[-1])}{of}"
            head += f" (more follow: from_line={last + 1}" if more else " (the end of the output"
            head += f"{gap}) ---"
        parts.append("\n".join([head] + [f"{x.label}: {x.text}" for x in lines]))
        data[src.stream] = {"from_line": first, "lines": [vars(x) for x in lines], "more": more, "total_lines": total,
                            "gap_line": gap_line}
    return View("\n".join(parts) + "\n", {"from_line": from_line, "max_lines": max_lines, "streams": data})
