"""An output file as the views read it: what is kept of it, with the dropped middle (if any) shown as one line.

Past --max-output-bytes the middle of a running task's file is freed (hivebash/disk/output_limit.py): its bytes
read back as NULs. Every view reads through an OutputFile, whose offsets are those of the kept text: the head,
then a marker line (`[... 2.4 GiB dropped from the middle: over --max-output-bytes 1 GiB ...]`), then the rest.
So a tail, a window or a grep never sees a NUL of the gap, and says where it was. Lines are counted in the kept
text: exact before the gap, counted from it after (the dropped lines are not counted): `line_label` marks those.

Offsets the views hand out (new_only cursors, wait_for positions) are the file's own (`physical`); the views
turn them into offsets of the kept text (`logical`) and back.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

from common.humanize import human_bytes

_GAP_LINES: OrderedDict[tuple[int, int, int], int] = OrderedDict()  # (dev, ino, gap start) -> newlines before
_GAP_LINES_KEEP = 256
_lock = threading.Lock()


def size_words(n: int) -> str:
    """`2.4 GiB`, `1 GiB`, `512 KiB`, `80 bytes`: as the marker line and the notices say a size."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n // size} {unit}" if n % size == 0 else f"{n / size:.1f} {unit}"
    return f"{n} bytes"


@dataclass(frozen=True)
class Gap:
    """The dropped middle of one output file: bytes [start, end) were freed; `limit` is the
    --max-output-bytes the file passed (`knob` "state": the --max-state-bytes all outputs passed)."""

    start: int
    end: int
    limit: int
    knob: str = "output"

    @property
    def dropped(self) -> int:
        return self.end - self.start

    @classmethod
    def of(cls, dropped: dict[str, list] | None, stream: str) -> Gap | None:
        """A stream's gap from a task's record (`Task.dropped`), if it has one."""
        found = (dropped or {}).get(stream)
        return None if found is None else cls(*found)

    def notice(self) -> str:
        """The marker line the views show in its place."""
        return (f"[... {size_words(self.dropped)} dropped from the middle: over --max-{self.knob}-bytes "
                f"{size_words(self.limit)} ...]")

    def passed(self, stream: str) -> str:
        """What passed its limit, said once: `stdout passed 1 GiB` (or all outputs passed --max-state-bytes)."""
        if self.knob == "state":
            return f"the outputs passed --max-state-bytes {size_words(self.limit)}; the middle of {stream} was dropped"
        return f"{stream} passed {size_words(self.limit)}; the middle was dropped"


class OutputFile:
    """An output file open for reading (the caller closes it), read in offsets of its kept text."""

    def __init__(self, fd: int, gap: Gap | None = None):
        self.fd = fd
        self.gap = gap
        self._marker = b""
        self._shift = 0
        self._gap_line: int | None = None  # file offset - kept offset, after the gap
        if gap is not None:
            cut_mid_line = gap.start > 0 and os.pread(fd, 1, gap.start - 1) != b"\n"
            self._marker = (b"\n" if cut_mid_line else b"") + gap.notice().encode() + b"\n"
            self._shift = gap.end - gap.start - len(self._marker)

    def close(self) -> None:
        os.close(self.fd)

    def stamp(self) -> os.stat_result:
        return os.fstat(self.fd)

    def key(self, st: os.stat_result | None = None) -> tuple[int, ...]:
        """Names this file's kept text, for the caches of line counts (a wider gap is another text)."""
        st = st or os.fstat(self.fd)
        if self.gap is None:
            return (st.st_dev, st.st_ino)
        return (st.st_dev, st.st_ino, self.gap.start, self.gap.end)

    def size(self, st: os.stat_result | None = None) -> int:
        """Bytes of kept text (the file's size when nothing was dropped)."""
        size = (st or os.fstat(self.fd)).st_size
        return size if self.gap is None else max(self.gap.start + len(self._marker), size - self._shift)

    def logical(self, offset: int) -> int:
        """A file offset as an offset of the kept text (one in the gap: the gap's marker line)."""
        gap = self.gap
        if gap is None or offset <= gap.start:
            return offset
        return gap.start if offset < gap.end else offset - self._shift

    def physical(self, offset: int) -> int:
        """An offset of the kept text as a file offset (within the marker line: the gap's start, unseen)."""
        gap = self.gap
        if gap is None or offset <= gap.start:
            return offset
        return gap.start if offset < gap.start + len(self._marker) else offset + self._shift

    def pread(self, n: int, offset: int) -> bytes:
        gap = self.gap
        if gap is None or offset >= gap.start + len(self._marker):
            return os.pread(self.fd, n, offset + self._shift)
        parts = []
        if offset < gap.start:
            head = os.pread(self.fd, min(n, gap.start - offset), offset)
            parts.append(head)
            offset, n = offset + len(head), n - len(head)
        if n > 0 and offset >= gap.start:
            piece = self._marker[offset - gap.start: offset - gap.start + n]
            parts.append(piece)
            offset, n = offset + len(piece), n - len(piece)
            if n > 0:
                parts.append(os.pread(self.fd, n, offset + self._shift))
        return b"".join(parts)

    def preadv(self, view: memoryview, offset: int) -> int:
        """Read into `view` (as os.preadv does with one buffer): the count read."""
        gap = self.gap
        if gap is None or offset >= gap.start + len(self._marker):
            return os.preadv(self.fd, [view], offset + self._shift)
        data = self.pread(len(view), offset)
        view[: len(data)] = data
        return len(data)

    def gap_line(self) -> int | None:
        """The number of the marker line (lines after it are counted from the gap), None with no gap."""
        gap = self.gap
        if gap is None or self._gap_line is not None:
            return self._gap_line
        st = os.fstat(self.fd)
        key = (st.st_dev, st.st_ino, gap.start)
        with _lock:
            known = _GAP_LINES.get(key)
        if known is None:
            known, pos = 0, 0
            while pos < gap.start:
                chunk = os.pread(self.fd, min(1 << 20, gap.start - pos), pos)
                if not chunk:
                    break
                known += chunk.count(b"\n")
                pos += len(chunk)
            with _lock:
                _GAP_LINES[key] = known
                while len(_GAP_LINES) > _GAP_LINES_KEEP:
                    _GAP_LINES.popitem(last=False)
        self._gap_line = known + (2 if self._marker.startswith(b"\n") else 1)
        return self._gap_line

    def after_gap(self, number: int) -> bool:
        """Whether line `number` comes after the gap (its number is counted from the gap)."""
        gap_line = self.gap_line()
        return gap_line is not None and number > gap_line


def open_kept(path: str, gap: Gap | None = None) -> OutputFile | None:
    """The output file at `path` open for reading, or None when it is missing or something else was planted
    there (a link: ELOOP; a FIFO: not waited on): its text must never reach the model."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return OutputFile(fd, gap)
    except BaseException:
        os.close(fd)
        raise


def passed_line(dropped: dict[str, list] | None) -> str | None:
    """The one line an answer and a todo give a task whose output passed --max-output-bytes:
    `output: stdout passed 1 GiB; the middle was dropped (2.4 GiB)`; None when none did."""
    if not dropped:  # most tasks: no work on their answer's path
        return None
    gaps = [(s, g) for s in ("stdout", "stderr") if (g := Gap.of(dropped, s)) is not None]
    if not gaps:
        return None
    said = "; and ".join(f"{g.passed(s)} ({size_words(g.dropped)})" for s, g in gaps)
    return f"output: {said}"


def gap_data(dropped: dict[str, list] | None, stream: str, written: int) -> dict | None:
    """What a status's data says of a stream's dropped middle: bytes written in all, kept, and the range."""
    if not dropped:
        return None
    gap = Gap.of(dropped, stream)
    if gap is None:
        return None
    return {"written_bytes": written, "kept_bytes": max(0, written - gap.dropped),
            "dropped": {"from_byte": gap.start, "to_byte": gap.end, "bytes": gap.dropped, "limit": gap.limit,
                        "over": f"--max-{gap.knob}-bytes"}}


def gap_note(f: OutputFile) -> str:
    """What a view's header says of a file's dropped middle ("" without one)."""
    if f.gap is None:
        return ""
    return (f"; {human_bytes(f.gap.dropped)} dropped from its middle (over --max-output-bytes "
            f"{human_bytes(f.gap.limit)}): line numbers marked ~ are counted from the gap")
