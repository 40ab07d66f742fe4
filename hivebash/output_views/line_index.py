"""Line numbers in an output file: where lines start (LineIndex, kept across views of an unchanged file),
the numbers of grep's hits, and the byte offset of a line for a window."""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict

from hivebash.output_views.kept import OutputFile


class LineIndex:
    """Where lines start in a file that has not changed since: (byte offset, newlines before it) pairs
    recorded by every count that read a whole block, so the next grep or window of the same output counts
    from the nearest one instead of from the start (counting lines is half the cost of a grep). Kept per
    file while its size and mtime stay the same (a task's output that is still written gets none)."""

    _cache: OrderedDict[tuple[int, ...], LineIndex] = OrderedDict()
    _lock = threading.Lock()
    KEEP = 64  # files

    def __init__(self, key: tuple[int, ...], stamp: tuple[int, int], points: list[tuple[int, int]]):
        self.key, self.stamp, self.points = key, stamp, points

    @classmethod
    def of(cls, f: OutputFile) -> LineIndex:
        st = f.stamp()
        key, stamp = f.key(st), (st.st_size, st.st_mtime_ns)
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

    def advance(self, f: OutputFile, pos: int, before: int, target: int, buf: bytearray) -> tuple[int, int]:
        """From `pos` (with `before` newlines before it) to `target`: (target, newlines before it)."""
        point = self.nearest(target)
        if point[0] > pos:
            pos, before = point
        view = memoryview(buf)
        while pos < target:
            n = f.preadv(view[: min(len(buf), target - pos)], pos)
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


def number_hits(f: OutputFile, hits: list, buf: bytearray) -> None:
    """Give each hit (in file order) its line number: newlines before it, plus one."""
    index = LineIndex.of(f)
    pos, before = 0, 0
    for h in hits:
        pos, before = index.advance(f, pos, before, h.offset, buf)
        h.number = before + 1
    index.save()


def offset_of_line(f: OutputFile, line: int, buf: bytearray) -> int | None:
    """Byte offset where line `line` (1-based) starts, or None if the file has fewer lines."""
    if line == 1:
        return 0
    index = LineIndex.of(f)
    offset, passed = index.nearest(line - 1, by_lines=True)
    need = line - 1 - passed  # newlines still to pass
    view = memoryview(buf)
    try:
        while True:
            n = f.preadv(view, offset)
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
            return start if start < offset + n or f.size() > start else None
    finally:
        index.save()
