"""Output files that cannot fill the disk: past --max-output-bytes a running task's file keeps its head and its
newest bytes, and the middle is freed while the task runs on.

How: a hole is punched into the middle (fallocate PUNCH_HOLE | KEEP_SIZE). The file's size and every offset
stay as they were, so the task's own appends (its files are open O_APPEND), the agent's new_only cursors and the
line indexes stay right; the freed range reads back as NUL bytes, which the views skip (output_views/kept.py):
the task's record keeps the range (`Task.dropped`). The range is cut at line ends where one is near, so the
views show whole lines on both sides of it.

Where the filesystem cannot free a range (ramfs, vfat, NFS before 4.2: EOPNOTSUPP), the task is stopped at the
limit as `killed`, saying why: its output is never silently lost and the disk never fills.

Cost: nothing per write. One thread (OutputGuard) looks at the size on disk (a stat: st_blocks; a file is opened
only once a range of it is to be freed) of each running task's files, each as often as its growth needs: every
LOOK_MAX seconds at most, sooner when the file could reach the limit before then at the rate it grows (FAST_RATE
at least). A task is watched from its spawn, its first look LOOK_MIN later (a task that ends sooner costs a dict
entry); at its end one last look where a file passed the trigger, so it ends under the limit whatever it wrote
between looks. A writer faster than the looks (`yes`: ~1.5 GB/s) overshoots by
what it writes in one interval (a few MB) until the next look. Where the daemon may, the guard's thread runs at a
higher priority than the tasks (a loaded machine delayed its looks by tens of ms).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from common.disk.whole_files import punch_hole
from common.humanize import human_bytes

if TYPE_CHECKING:
    from hivebash.tasks.task import Task

log = logging.getLogger(__name__)

HEAD_MAX = 64 << 20  # bytes: the kept head is an eighth of the limit, at most this
LOOK_MAX = 0.1  # seconds between two looks at a file at most
LOOK_MIN = 0.005  # seconds: no file is looked at more often; a new task's first look comes this long after its spawn
GUARD_NICE = -10  # the guard thread's nice value, where it may raise its priority
TICK = 0.02  # seconds: while any task runs the guard wakes at least this often (a new task's first look is due)
FAST_RATE = 1 << 30  # bytes/s: the rate a file is assumed able to reach (`yes` into a file: ~1 GiB/s)
LINE_SEARCH = 1 << 16  # bytes searched for a line end at each edge of the dropped range
SQUEEZE_TAIL = 1 << 20  # bytes: the newest bytes a running file keeps when --max-state-bytes frees its middle
PAGE = 4096  # the unit a filesystem frees: the edges of a punched range that cut a page are zeroed, not freed


def head_bytes(limit: int) -> int:
    """The bytes kept at the start of a file over `limit`: an eighth of it, at most HEAD_MAX."""
    return min(limit // 8, HEAD_MAX)


def tail_bytes(limit: int) -> int:
    """The newest bytes kept once the middle is freed: the rest of the limit's room is left for growth, so a
    file is punched once per quarter-limit written rather than at every look."""
    return limit // 2


def trigger_bytes(limit: int) -> int:
    """Blocks on disk past which the middle is freed: below the limit, so the growth between two looks fits."""
    return limit - limit // 8


@dataclass
class Watched:
    """One output file of a running task."""

    stream: str
    path: str
    fd: int | None = None  # open for writing (fallocate needs it), from the first look that frees a range
    next_look: float = 0.0
    last_size: int = 0
    last_at: float = 0.0
    blocks: int = 0  # bytes on disk at the last look
    size: int = 0


def line_end_after(fd: int, offset: int) -> int:
    """Just past the first `\\n` at or after `offset` (within LINE_SEARCH), else `offset` itself."""
    chunk = os.pread(fd, LINE_SEARCH, offset)
    nl = chunk.find(b"\n")
    return offset + nl + 1 if nl >= 0 else offset


def line_start_at_or_before(fd: int, offset: int) -> int:
    """Just past the last `\\n` before `offset` (within LINE_SEARCH), else `offset` itself."""
    lo = max(0, offset - LINE_SEARCH)
    nl = os.pread(fd, offset - lo, lo).rfind(b"\n")
    return lo + nl + 1 if nl >= 0 else offset


def hole_end(fd: int, offset: int) -> int:
    """Where the freed bytes that start at `offset` end: past its NULs, across holes (SEEK_DATA). A daemon that
    stopped after it freed a wider range than its last saved record says leaves a file whose record ends
    short of the hole; a restart moves the record's end here, so no view reads the rest of it as NULs."""
    size = os.fstat(fd).st_size
    pos = offset
    while pos < size:
        chunk = os.pread(fd, PAGE, pos)
        zeros = len(chunk) - len(chunk.lstrip(b"\0"))
        pos += zeros
        if zeros < len(chunk) or not chunk:
            break
        try:
            pos = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError:  # ENXIO: a hole up to the end of the file
            return size
    return min(pos, size)


def settle_dropped(task: Task, paths: dict[str, str]) -> bool:
    """Make a task's recorded ranges end where the freed bytes of its files do (see `hole_end`); whether any
    moved. For a task a previous daemon left behind, before its record is written again."""
    moved = {}
    for stream, gap in (task.dropped or {}).items():
        try:
            fd = os.open(paths[stream], os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except (OSError, KeyError):
            continue
        try:
            end = hole_end(fd, gap[1])
        finally:
            os.close(fd)
        if end > gap[1]:
            moved[stream] = [gap[0], end, *gap[2:]]
    if moved:
        task.dropped = {**(task.dropped or {}), **moved}
        log.warning("task %s: its record's dropped range ended short of its file's hole: %s", task.id, moved)
    return bool(moved)


def _raise_priority() -> None:
    """Run the guard's thread ahead of the tasks it watches, where the daemon may (CAP_SYS_NICE, or root): on a
    loaded machine a flood and its pipeline take the cores, and a look that comes tens of ms late lets `yes`
    write tens of MB more. Elsewhere it runs at the daemon's priority."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), GUARD_NICE)
    except OSError:
        pass


class GuardHooks(Protocol):
    """What the guard asks of the engine (lifecycle.Lifecycle)."""

    def dropping(self, task: Task, stream: str, start: int, end: int, over: list | None = None) -> None:
        """Bytes [start, end) of `stream` are about to be freed: the task's record says so from now on (the
        views skip them before they read back as NULs); `over`: [quota, "state"] when --max-state-bytes
        frees them."""

    def running_bytes(self, on_disk: int) -> None:
        """The running tasks' outputs hold `on_disk` bytes (after each pass of looks)."""

    def over_limit(self, task: Task, reason: str) -> None:
        """The file passed the limit and cannot be cut: stop the task (killed), saying `reason`."""


class OutputGuard:
    """The thread that keeps every running task's output files under the limit (see the module doc)."""

    def __init__(self, limit: int, hooks: GuardHooks, clock: Callable[[], float] = time.monotonic):
        self.limit = limit
        self.hooks = hooks
        self.clock = clock
        self._changed = threading.Condition(threading.Lock())  # guards _watched; a pass holds it
        self._watched: dict[int, tuple[Task, list[Watched]]] = {}  # id(task) -> its files
        self._punchable: dict[int, bool] = {}  # st_dev -> whether a hole can be punched there
        self._closing = False
        self._thread: threading.Thread | None = None

    def watch(self, task: Task, paths: dict[str, str]) -> None:
        """Look after `task`'s files (stream -> path) from now until `unwatch`. No limit: nothing to do."""
        if not self.limit:
            return
        first = self.clock() + LOOK_MIN  # a task that ends sooner is never looked at
        files = [Watched(stream, path, next_look=first) for stream, path in paths.items()]
        with self._changed:
            idle = not self._watched  # else the guard wakes within TICK anyway: no wake-up per task
            self._watched[id(task)] = (task, files)
            if idle:
                self._changed.notify()
        if self._thread is None:
            self._start()

    def finish(self, task: Task, sizes: dict[str, int], paths: Callable[[], dict[str, str]]) -> int:
        """The task's shell ended (`sizes`: its files' sizes now): one last look at its files, so its last
        burst is cut too, then forget them. A task whose files are under the trigger is not looked at again
        (most tasks: no syscall; no lock either when it ended before it was watched). Returns the files' bytes
        on disk (their sizes where they were not looked at)."""
        if not self.limit:
            return sum(sizes.values())
        small = max(sizes.values(), default=0) <= trigger_bytes(self.limit)
        if id(task) not in self._watched:  # (read without the lock: only the worker at its end removes it)
            if small:
                return sum(sizes.values())
            files = [Watched(stream, path) for stream, path in paths().items()]
        else:
            with self._changed:
                files = self._watched.pop(id(task))[1]
            if small and all(w.fd is None for w in files):  # nothing to cut, no file open: no syscall
                return sum(sizes.values())
        with self._changed:
            for w in files:
                try:
                    self._look(task, w, self.clock(), final=True)
                except OSError as exc:
                    log.warning("task %s: the last look at its %s failed: %s", task.id, w.stream, exc)
                finally:
                    if w.fd is not None:
                        os.close(w.fd)
        return sum(w.blocks for w in files)

    def on_disk(self) -> int:
        """Bytes on disk of the running tasks' output files, at the last look at each."""
        with self._changed:
            return sum(w.blocks for _, files in self._watched.values() for w in files)

    def squeeze(self, need: int, quota: int) -> int:
        """Free about `need` bytes from the middles of the largest running files (--max-state-bytes): each keeps
        its head and its newest SQUEEZE_TAIL bytes. Returns the bytes freed."""
        freed = 0
        with self._changed:
            files = sorted(((w.blocks, task, w) for task, ws in self._watched.values() for w in ws
                            if w.blocks and not task.stop_reason), key=lambda f: -f[0])
            for before, task, w in files:
                if freed >= need:
                    break
                if (fd := self._opened(w)) is None:
                    continue
                st = os.fstat(fd)
                if self._can_punch(fd, st.st_dev):
                    self._cut(task, w, fd, st.st_size, SQUEEZE_TAIL, [quota, "state"])
                    freed += max(0, before - w.blocks)
        return freed

    def close(self) -> None:
        with self._changed:
            self._closing = True
            self._changed.notify()
        if self._thread is not None:
            self._thread.join(5.0)

    def _start(self) -> None:
        with self._changed:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._loop, name="bash-output-guard", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        _raise_priority()
        with self._changed:
            while not self._closing:
                now = self.clock()
                due = min((w.next_look for _, files in self._watched.values() for w in files), default=None)
                if due is None or due > now:
                    self._changed.wait(None if due is None else min(TICK, due - now))
                    continue
                for task, files in list(self._watched.values()):
                    for w in files:
                        if w.next_look <= now:
                            try:
                                self._look(task, w, now)
                            except Exception:
                                log.exception("task %s: looking at its %s failed", task.id, w.stream)
                                w.next_look = now + LOOK_MAX
                self.hooks.running_bytes(sum(w.blocks for _, files in self._watched.values() for w in files))

    def _look(self, task: Task, w: Watched, now: float, final: bool = False) -> None:
        """One look at a file: free its middle when its blocks passed the trigger (or stop the task where that
        cannot be done), then decide when to look again."""
        # A file is opened only once it has a range to free: most tasks' looks are one stat each, and their
        # files never cost an open and a close.
        try:
            st = os.fstat(w.fd) if w.fd is not None else os.stat(w.path, follow_symlinks=False)
        except OSError:  # removed, or not ours to look at: nothing of it to keep small
            w.next_look = now + LOOK_MAX
            return
        w.blocks, w.size = st.st_blocks * 512, st.st_size
        limit = self.limit
        if w.blocks > trigger_bytes(limit) and not task.stop_reason and (fd := self._opened(w)) is not None:
            if self._can_punch(fd, st.st_dev):
                self._cut(task, w, fd, st.st_size)
            elif w.blocks > limit and not final:  # (a task that already ended is not stopped)
                self.hooks.over_limit(task, f"{w.stream} reached --max-output-bytes {human_bytes(limit)} and the "
                                            "state filesystem cannot free the middle of a file (fallocate: "
                                            "Operation not supported)")
        ceiling = limit if self._punchable.get(st.st_dev) is False else trigger_bytes(limit)
        room = max(0, ceiling - w.blocks)
        rate = (w.size - w.last_size) / (now - w.last_at) if now > w.last_at else 0.0
        w.last_size, w.last_at = w.size, now
        w.next_look = now + min(LOOK_MAX, max(LOOK_MIN, room / max(rate, FAST_RATE)))

    @staticmethod
    def _opened(w: Watched) -> int | None:
        """The file open for writing (fallocate needs it); None when it is gone or not our file."""
        if w.fd is None:
            try:
                w.fd = os.open(w.path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                return None
        return w.fd

    def _cut(self, task: Task, w: Watched, fd: int, size: int, tail: int | None = None,
             over: list | None = None) -> None:
        """Free the middle: from the end of the head (or of the range freed before) to the newest `tail`
        bytes (tail_bytes of the limit), both edges moved to a line end when one is near."""
        gap = (task.dropped or {}).get(w.stream)
        start = gap[0] if gap else line_start_at_or_before(fd, head_bytes(self.limit))
        # From the page the last range ended in: its start is dropped already, and a page is freed only whole.
        begin = max(start, gap[1] & -PAGE) if gap else start
        end = line_end_after(fd, max(0, size - (tail_bytes(self.limit) if tail is None else tail)))
        if end <= (gap[1] if gap else start):
            return
        self.hooks.dropping(task, w.stream, start, end, over)
        try:
            punch_hole(fd, begin, end - begin)
        except OSError as exc:
            log.warning("task %s: cannot free the middle of its %s (%s)", task.id, w.stream, exc.strerror)
            self._punchable[os.fstat(fd).st_dev] = False
            self.hooks.over_limit(task, f"{w.stream} reached --max-output-bytes {human_bytes(self.limit)} and its "
                                        f"middle could not be freed (fallocate: {exc.strerror})")
        else:
            st = os.fstat(fd)
            w.blocks = st.st_blocks * 512

    def _can_punch(self, fd: int, dev: int) -> bool:
        """Whether this filesystem frees punched ranges, tried once per filesystem (a punch past the end of the
        file frees nothing)."""
        known = self._punchable.get(dev)
        if known is None:
            try:
                punch_hole(fd, os.fstat(fd).st_size + (1 << 20), 4096)
                known = True
            except OSError:
                known = False
            self._punchable[dev] = known
        return known
