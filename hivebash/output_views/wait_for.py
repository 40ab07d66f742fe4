"""wait_for: the first new line of an output file that matches a regex (`Watch`), or, for a task that takes
input, its unfinished last line too (`PromptWatch`: a prompt such as `>>> ` or `[y/N] ` has no newline yet)."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from hivebash.output_views.grep_view import Hit, compile_pattern, scan
from hivebash.output_views.kept import Gap, OutputFile
from hivebash.output_views.line_index import number_hits
from hivebash.output_views.reading import LINE_CAP, Line, Source, open_output, read_line_at, shown_text


@dataclass
class Watch:
    """Follows one output file from a byte offset for lines matching a regex (status/run `wait_for`): only
    complete lines count (a line still being written might match only once it is whole), unless `final`. A
    file found smaller than the offset was truncated: it is watched again from its start (`truncated` says so)."""

    source: Source
    offset: int
    regexes: tuple[re.Pattern, re.Pattern]
    buf: bytearray = field(default_factory=lambda: bytearray(1 << 16))
    truncated: int = 0  # how many times the file was found cut below the offset
    origin: int = 0  # where the watch began: the lines before it were shown to the agent already
    gap_of: Callable[[], Gap | None] | None = None  # the file's dropped middle now (it grows while a task runs)

    def _open(self) -> OutputFile | None:
        src = self.source if self.gap_of is None else dataclasses.replace(self.source, gap=self.gap_of())
        return open_output(src)

    def _line(self, f: OutputFile, number: int, offset: int) -> tuple[Line, int]:
        raw, nxt = read_line_at(f, offset)
        return Line(self.source.stream, number, shown_text(raw, nxt - offset), from_gap=f.after_gap(number)), nxt

    def earlier(self) -> Line | None:
        """The first matching line before `origin` (one the agent was shown before the call), or None."""
        if not self.origin:
            return None
        f = self._open()
        if f is None:
            return None
        try:
            stop = f.logical(min(self.origin, f.stamp().st_size))
            hits, _, _ = scan(f, self.source.stream, self.regexes, 0, 1, self.buf, stop, count=False)
            if not hits:
                return None
            number_hits(f, hits, self.buf)
            return self._line(f, hits[0].number, hits[0].offset)[0]
        finally:
            f.close()

    def check(self, final: bool = False) -> Line | None:
        """The first matching line written since the last check, or None; moves past what it read."""
        f = self._open()
        if f is None:
            return None
        try:
            st = f.stamp()
            if st.st_size < self.offset:  # emptied or cut (by the task or the agent): what it holds now is all new
                self.offset, self.truncated = 0, self.truncated + 1
            offset, size = f.logical(self.offset), f.size(st)
            stop = size if final else _last_line_end(f, offset, size)
            if stop <= offset:
                return None
            hits, _, _ = scan(f, self.source.stream, self.regexes, offset, 1, self.buf, stop, count=False)
            if not hits:
                self.offset = f.physical(stop)
                return None
            number_hits(f, hits, self.buf)
            line, nxt = self._line(f, hits[0].number, hits[0].offset)
            self.offset = f.physical(nxt)
            return line
        finally:
            f.close()


def _last_line_end(f: OutputFile, offset: int, size: int) -> int:
    """Offset just past the last newline before `size` (at or after `offset`)."""
    lo = size
    while lo > offset:
        start = max(offset, lo - (1 << 16))
        nl = f.pread(lo - start, start).rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        lo = start
    return offset


def watch(source: Source, pattern: str, from_end: bool = True, start: int | None = None,
          gap_of: Callable[[], Gap | None] | None = None) -> Watch:
    """A Watch of `source` for `pattern`: from byte `start` (the agent's cursor), else from the file's current
    end (only new lines) or its start."""
    regexes = compile_pattern(pattern)
    if start is None:
        try:
            start = os.stat(source.path, follow_symlinks=False).st_size if from_end else 0
        except FileNotFoundError:
            start = 0
    return Watch(source, start, regexes, origin=start, gap_of=gap_of)


class PromptWatch(Watch):
    """A Watch of one stream that also matches the last line while it has no newline yet (a prompt); the
    complete lines are matched as every `wait_for` matches them."""

    def __init__(self, source: Source, pattern: str, offset: int, gap_of: Callable[[], Gap | None] | None = None):
        super().__init__(source, offset, compile_pattern(pattern), gap_of=gap_of)
        self.prompt = re.compile(pattern)

    def check(self, final: bool = False) -> Line | None:
        line = super().check(final)
        if line is not None or final:
            return line
        f = self._open()
        if f is None:
            return None
        try:
            start = self.offset  # past the last complete line: the rest is the unfinished one
            size = f.stamp().st_size
            if size <= start:
                return None
            text = shown_text(os.pread(f.fd, min(size - start, LINE_CAP * 4), start))  # (the newest bytes)
            if not self.prompt.search(text):
                return None
            hit = Hit(self.source.stream, 0, f.logical(start))
            number_hits(f, [hit], self.buf)
            return Line(self.source.stream, hit.number, text, from_gap=f.after_gap(hit.number))
        finally:
            f.close()
