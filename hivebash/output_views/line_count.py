"""How many lines an output file has, and the number of the line at an offset, for a file that only grows.

Every tail header gives line numbers, so every `status` needs the newlines before where its tail starts.
Counting a whole file each time would cost a full read of a multi-GiB output per poll; instead the count at
the furthest offset read so far is kept per file (by device and inode), and the next call counts only what
was appended since (or, for an offset a little before it, the bytes between, counted back). A file found
smaller than the kept offset was truncated: it is counted again from its start. A first count that would
outlast COUNT_SECONDS stops, keeps how far it got, and answers None (the header then gives bytes only).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

from hivebash.output_views.kept import OutputFile

COUNT_SECONDS = 2.0  # at most this long counting lines in one call (the rest is counted by the next)
BACK_LIMIT = 16 << 20  # bytes counted back from the kept point, rather than forward from an earlier one
CHUNK = 1 << 20

_known: OrderedDict[tuple[int, ...], tuple[int, int]] = OrderedDict()  # OutputFile.key -> (offset, newlines before)
_lock = threading.Lock()
KEEP = 4096  # files (a task has two)


def _count(f: OutputFile, start: int, stop: int, deadline: float) -> tuple[int, int]:
    """Newlines in [start, stop): (count, where counting stopped)."""
    count, pos = 0, start
    while pos < stop:
        chunk = f.pread(min(CHUNK, stop - pos), pos)
        if not chunk:
            break
        count += chunk.count(b"\n")
        pos += len(chunk)
        if pos < stop and time.monotonic() > deadline:
            break
    return count, pos


def newlines_before(f: OutputFile, offset: int, st: os.stat_result | None = None) -> int | None:
    """Newlines in the kept text before byte `offset`, or None when counting them would take too long this
    call. `st`: the file's fstat, when the caller has it (one syscall fewer)."""
    st = st or f.stamp()
    key = f.key(st)
    with _lock:
        known = _known.get(key)
    if known is not None and known[0] > f.size(st):  # truncated since: what is there now is all new
        known = None
        with _lock:
            _known.pop(key, None)
    point, before = known or (0, 0)
    deadline = time.monotonic() + COUNT_SECONDS
    if point > offset and point - offset <= BACK_LIMIT:
        between, _ = _count(f, offset, point, float("inf"))
        return before - between
    if point > offset:
        point, before = 0, 0
    counted, reached = _count(f, point, offset, deadline)
    _remember(key, reached, before + counted)
    return before + counted if reached >= offset else None


def _remember(key: tuple[int, ...], offset: int, newlines: int) -> None:
    with _lock:
        known = _known.get(key)
        if known is None or offset > known[0]:
            _known[key] = (offset, newlines)
            _known.move_to_end(key)
            while len(_known) > KEEP:
                _known.popitem(last=False)


def remember(f: OutputFile, offset: int, newlines: int, st: os.stat_result | None = None) -> None:
    """Keep a count a view made itself (its tail ends at the file's end): the next call starts from there."""
    _remember(f.key(st), offset, newlines)


def line_total(newlines: int, size: int, ends_with_newline: bool) -> int:
    """Lines in a file of `size` bytes with `newlines` newlines (a last line without one counts)."""
    return newlines + (1 if size and not ends_with_newline else 0)
