"""A window of numbered lines of output files (`from_line`, `max_lines`), within a byte budget."""

from __future__ import annotations

import os

from .line_index import offset_of_line
from .reading import (
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


def window(sources: list[Source], from_line: int, max_lines: int, budget: int = VIEW_BUDGET) -> View:
    """Lines `from_line` .. `from_line + max_lines - 1` of each source, numbered, cut to `budget`."""
    if isinstance(from_line, bool) or not isinstance(from_line, int) or from_line < 1:
        raise ViewError("from_line: must be an integer >= 1 (the first line is 1)")
    if isinstance(max_lines, bool) or not isinstance(max_lines, int) or not 1 <= max_lines <= MAX_LINES_MAX:
        raise ViewError(f"max_lines: must be an integer from 1 to {MAX_LINES_MAX}")
    buf = read_buffer(sources)
    parts, data = [], {}
    share = budget // max(1, len(sources))
    for src in sources:
        fd = open_output(src.path)
        lines: list[Line] = []
        more = False
        offset = None if fd is None else offset_of_line(fd, from_line, buf)
        try:
            used = 0
            while fd is not None and offset is not None and len(lines) < max_lines:
                raw, nxt = read_line_at(fd, offset)
                if nxt == offset:
                    break
                line = Line(src.stream, from_line + len(lines), shown_text(raw))
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
