"""The lines of a failed task's output that look like its failure (`error`, `fail`, a traceback, ...), from
anywhere in the output: a long build's tail is often its last hundred "compiling" lines, and the one error
line is thousands of lines up. Only the output above each stream's shown tail is searched (the tail is shown
anyway); the last FAILURE_LINES matches are kept. A stream's lines are remembered for its file as it stands
(inode, size, mtime, gap, where the tail starts): an ended task's output does not change, so its next status
reads nothing again (a search of a large output takes seconds)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from hivebash.output_views.grep_view import compile_pattern, scan
from hivebash.output_views.kept import OutputFile
from hivebash.output_views.line_index import number_hits
from hivebash.output_views.reading import Line, Source, open_output, read_buffer, read_line_at, shown_text

FAILURE_PATTERN = r"(?i)error|fail|traceback|exception|panic"
FAILURE_LINES = 5
_KEEP = 4096  # matches remembered while scanning (the last FAILURE_LINES of them are shown)
_REGEXES = compile_pattern(FAILURE_PATTERN[4:])  # searched in lower-cased blocks (scan's `fold`): the (?i) of it
_SEEN: OrderedDict[tuple, list[Line]] = OrderedDict()  # a stream's file as it stood -> its failure lines
_SEEN_KEEP = 64
_lock = threading.Lock()


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
            st = f.stamp()
            key = (src.stream, *f.key(st), st.st_size, st.st_mtime_ns, stop)
            with _lock:
                known = _SEEN.get(key)
            if known is None:
                buf = buf or read_buffer(sources)
                known = _stream_lines(f, src.stream, stop, buf)
                with _lock:
                    _SEEN[key] = known
                    while len(_SEEN) > _SEEN_KEEP:
                        _SEEN.popitem(last=False)
            found += known
        finally:
            f.close()
    return found[-FAILURE_LINES:]


def _stream_lines(f: OutputFile, stream: str, stop: int, buf: bytearray) -> list[Line]:
    hits, _, _ = scan(f, stream, _REGEXES, 0, _KEEP, buf, stop, count=False, fold=True)
    hits = hits[-FAILURE_LINES:]
    number_hits(f, hits, buf)
    lines = []
    for h in hits:
        raw, nxt = read_line_at(f, h.offset)
        lines.append(Line(stream, h.number, shown_text(raw, nxt - h.offset), from_gap=f.after_gap(h.number)))
    return lines
