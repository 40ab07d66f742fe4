"""wait_for: the first new line of an output file that matches a regex (`Watch`), or, for a task that takes
input, its unfinished last line too (`PromptWatch`: a prompt such as `>>> ` or `[y/N] ` has no newline yet)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from hivebash.output_views.grep_view import Hit, compile_pattern, scan
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

    def earlier(self) -> Line | None:
        """The first matching line before `origin` (one the agent was shown before the call), or None."""
        if not self.origin:
            return None
        fd = open_output(self.source.path)
        if fd is None:
            return None
        try:
            stop = min(self.origin, os.fstat(fd).st_size)
            hits, _, _ = scan(fd, self.source.stream, self.regexes, 0, 1, self.buf, stop, count=False)
            if not hits:
                return None
            number_hits(fd, hits, self.buf)
            raw, nxt = read_line_at(fd, hits[0].offset)
            return Line(self.source.stream, hits[0].number, shown_text(raw, nxt - hits[0].offset))
        finally:
            os.close(fd)

    def check(self, final: bool = False) -> Line | None:
        """The first matching line written since the last check, or None; moves past what it read."""
        fd = open_output(self.source.path)
        if fd is None:
            return None
        try:
            size = os.fstat(fd).st_size
            if size < self.offset:  # emptied or cut (by the task or the agent): what it holds now is all new
                self.offset, self.truncated = 0, self.truncated + 1
            stop = size if final else self._last_line_end(fd, size)
            if stop <= self.offset:
                return None
            hits, _, _ = scan(fd, self.source.stream, self.regexes, self.offset, 1, self.buf, stop, count=False)
            if not hits:
                self.offset = stop
                return None
            number_hits(fd, hits, self.buf)
            number = hits[0].number
            raw, self.offset = read_line_at(fd, hits[0].offset)
            return Line(self.source.stream, number, shown_text(raw, self.offset - hits[0].offset))
        finally:
            os.close(fd)

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


def watch(source: Source, pattern: str, from_end: bool = True, start: int | None = None) -> Watch:
    """A Watch of `source` for `pattern`: from byte `start` (the agent's cursor), else from the file's current
    end (only new lines) or its start."""
    regexes = compile_pattern(pattern)
    if start is None:
        try:
            start = os.stat(source.path, follow_symlinks=False).st_size if from_end else 0
        except FileNotFoundError:
            start = 0
    return Watch(source, start, regexes, origin=start)


class PromptWatch(Watch):
    """A Watch of one stream that also matches the last line while it has no newline yet (a prompt); the
    complete lines are matched as every `wait_for` matches them."""

    def __init__(self, source: Source, pattern: str, offset: int):
        super().__init__(source, offset, compile_pattern(pattern))
        self.prompt = re.compile(pattern)

    def check(self, final: bool = False) -> Line | None:
        line = super().check(final)
        if line is not None or final:
            return line
        fd = open_output(self.source.path)
        if fd is None:
            return None
        try:
            start = self.offset  # past the last complete line: the rest is the unfinished one
            size = os.fstat(fd).st_size
            if size <= start:
                return None
            text = shown_text(os.pread(fd, min(size - start, LINE_CAP * 4), start))
            if not self.prompt.search(text):
                return None
            hit = Hit(self.source.stream, 0, start)
            number_hits(fd, [hit], self.buf)
            return Line(self.source.stream, hit.number, text)
        finally:
            os.close(fd)
