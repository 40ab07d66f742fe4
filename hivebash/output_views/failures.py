"""The lines of a failed task's output that look like its failure (`error`, `fail`, a traceback, ...), from
anywhere in the output: a long build's tail is often its last hundred "compiling" lines, and the one error
line is thousands of lines up. Only the output above each stream's shown tail is searched (the tail is shown
anyway); the last FAILURE_LINES matches are kept."""

from __future__ import annotations

from hivebash.output_views.grep_view import compile_pattern, scan
from hivebash.output_views.line_index import number_hits
from hivebash.output_views.reading import Line, Source, open_output, read_buffer, read_line_at, shown_text

FAILURE_PATTERN = r"(?i)error|fail|traceback|exception|panic"
FAILURE_LINES = 5
_KEEP = 4096  # matches remembered while scanning (the last FAILURE_LINES of them are shown)
_REGEXES = compile_pattern(FAILURE_PATTERN[4:])  # searched in lower-cased blocks (scan's `fold`): the (?i) of it


def failure_lines(sources: list[Source], above: dict[str, int]) -> list[Line]:
    """Up to FAILURE_LINES lines matching FAILURE_PATTERN before byte `above[stream]` of each stream (the last
    such lines of all streams together, in stream order)."""
    found: list[Line] = []
    buf = None
    for src in sources:
        stop = above.get(src.stream, 0)
        if stop <= 0:
            continue
        f = open_output(src)
        if f is None:
            continue
        try:
            buf = buf or read_buffer(sources)
            hits, _, _ = scan(f, src.stream, _REGEXES, 0, _KEEP, buf, stop, count=False, fold=True)
            hits = hits[-FAILURE_LINES:]
            number_hits(f, hits, buf)
            for h in hits:
                raw, nxt = read_line_at(f, h.offset)
                text = shown_text(raw, nxt - h.offset)
                found.append(Line(src.stream, h.number, text, from_gap=f.after_gap(h.number)))
        finally:
            f.close()
    return found[-FAILURE_LINES:]
