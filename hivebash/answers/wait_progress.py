"""What a waiting `run` or `status` tells a client that asked for progress: one line a person reads at a glance,
`running 12 s · 3,412 lines · last: "Compiling serde v1.0.210"` (the pacing is common/call_progress.Pacer's).

`news()` is what the wait calls on each look (one fstat per stream, the tasks' states): whether anything
changed since the last message. `message()` reads only what was appended since the last one to count lines
(at most COUNT_BUDGET a look: a task that writes faster, or a large output seen for the first time, is shown by
size until the count catches up) and the last few KiB of the stream written last for its last line.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from common.humanize import human_bytes, one_line
from common.protocol.call_progress import MESSAGE_CHARS
from hivebash import output_views as ov
from hivebash.output_views.reading import open_output
from hivebash.output_views.terminal_text import readable
from hivebash.tasks import task as T
from hivebash.tasks.entry import TaskEntry

if TYPE_CHECKING:
    from hivebash.tasks.registry import TaskRegistry

COUNT_BUDGET = 8 << 20  # bytes a message reads at most to count lines
LAST_LINE_BYTES = 4096  # how far back from a stream's end its last line is looked for
LAST_LINE_MIN = 24  # characters of the last line kept however long the rest of the message is


@dataclass
class _Stream:
    """One output file as the messages have seen it: its size at the last look, and its lines counted so far."""

    task_id: str
    source: ov.Source
    size: int = 0
    counted_to: int = 0
    lines: int = 0
    changed_ns: int = 0  # when it last grew (st_mtime_ns), to find the stream written last

    def look(self) -> bool:
        """Whether it grew (or shrank) since the last look; one fstat."""
        try:
            st = os.stat(self.source.path, follow_symlinks=False)
        except OSError:
            return False
        if st.st_size == self.size:
            return False
        self.size, self.changed_ns = st.st_size, st.st_mtime_ns
        return True

    def count(self, buf: bytearray) -> bool:
        """Count the newlines appended since the last count (up to COUNT_BUDGET); True when caught up."""
        if self.size < self.counted_to:  # truncated: count again from the start
            self.counted_to = self.lines = 0
        f = open_output(self.source)
        if f is None:
            return self.counted_to >= self.size
        view, pos, stop = memoryview(buf), self.counted_to, min(self.size, self.counted_to + COUNT_BUDGET)
        try:
            while pos < stop:
                n = os.preadv(f.fd, [view[: min(len(buf), stop - pos)]], pos)
                if n <= 0:
                    break
                self.lines += buf.count(b"\n", 0, n)
                pos += n
        finally:
            f.close()
        self.counted_to = pos
        return self.counted_to >= self.size

    def last_line(self) -> str:
        f = open_output(self.source)
        if f is None:
            return ""
        try:
            start = max(0, self.size - LAST_LINE_BYTES)
            raw = os.pread(f.fd, self.size - start, start)  # (the newest bytes: never in a dropped middle)
        finally:
            f.close()
        lines = [line for line in readable(raw).split("\n") if line.strip()]
        return lines[-1] if lines else ""


def human_span(seconds: float) -> str:
    """`12 s`, `4 min 12 s`, `2 h 5 min`: a running time at a glance."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


class WaitTelling:
    """The progress messages of one inline wait on `entries` (the registry's lock is taken briefly for their
    states)."""

    def __init__(self, registry: TaskRegistry, entries: list[TaskEntry], sources: Callable[[str], list[ov.Source]],
                 wait_for: str | None, clock: Callable[[], float]):
        self.registry, self.entries, self.wait_for, self.clock = registry, entries, wait_for, clock
        self.streams = [_Stream(e.id, src) for e in entries for src in sources(e.id)]
        self._states: list[str] = []
        self._buf: bytearray | None = None  # made by the first message: a wait that ends sooner never needs it
        self.news()

    def news(self) -> bool:
        """Whether a stream grew or a task changed state since the last look."""
        grew = [s.look() for s in self.streams]
        with self.registry.locked():
            states = [e.task.shown_state for e in self.entries]
        changed, self._states = states != self._states, states
        return any(grew) or changed

    def message(self) -> str:
        """One line under 200 characters: what it waits for, the state and running time, the output so far
        and its last line."""
        with self.registry.locked():
            tasks = [(e.id, e.task.shown_state, e.task.started_mono) for e in self.entries]
        self._buf = self._buf or bytearray(1 << 16)
        counted = all([s.count(self._buf) for s in self.streams])
        parts = [f"waiting for /{one_line(self.wait_for, 40)}/"] if self.wait_for else []
        parts.append(self._states_text(tasks))
        parts.append(self._amount_text(counted))
        head = " · ".join(parts)
        written = max(self.streams, key=lambda s: s.changed_ns, default=None)
        last = written.last_line() if written is not None and written.size else ""
        if written is None or not last:
            return one_line(head, MESSAGE_CHARS)
        where = f" ({written.task_id})" if len(self.entries) > 1 else ""
        room = max(LAST_LINE_MIN, MESSAGE_CHARS - len(head) - len(f' · last{where}: ""'))
        return one_line(f'{head} · last{where}: "{one_line(last, room)}"', MESSAGE_CHARS)

    def _states_text(self, tasks: list[tuple[str, str, float | None]]) -> str:
        if len(tasks) == 1:
            _, state, started = tasks[0]
            return state if started is None else f"{state} {human_span(self.clock() - started)}"
        counts: dict[str, int] = {}
        for _, state, _ in tasks:
            counts[state] = counts.get(state, 0) + 1
        order = sorted(counts, key=lambda s: T.STATE_ORDER.index(s) if s in T.STATE_ORDER else 99)
        return f"first of {len(tasks)} to end: " + ", ".join(f"{counts[s]} {s}" for s in order)

    def _amount_text(self, counted: bool) -> str:
        total = sum(s.size for s in self.streams)
        if not total:
            return "no output yet"
        if not counted:
            return f"{human_bytes(total)} of output"
        lines = sum(s.lines for s in self.streams)
        return f"{lines:,} line{'' if lines == 1 else 's'}"
