"""Which of a task's processes the kernel shows blocked reading the task's input, from /proc alone.

A process waits for input when one of its threads sleeps in `read`/`readv` on the input, or in a poll, select
or epoll wait whose read set holds it (`/proc/<pid>/task/<tid>/syscall`: the call's number and arguments; a
poll's or select's set is read from `/proc/<pid>/mem`, an epoll's from `/proc/<pid>/fdinfo/<epfd>`). "The
input" is the pipe the task's stdin is (its inode), or the task's terminal: a descriptor on that terminal, or
`/dev/tty` in a process whose controlling terminal it is (getpass), and for a terminal only the processes of
its foreground group read it. Both files need ptrace-read permission (the daemon's own uid, which its tasks
have); where they cannot be read, or the architecture's call numbers are not known, the reading says so
(`known` False) and nothing is guessed.

A poll, select or epoll wait that also waits for a socket, another pipe or another terminal is not a wait for
input (a network client waits for its peer too); one that also waits for the process's own event descriptors
(an event loop's eventfd or timerfd) counts once its output has settled. One with a timeout under MIN_TIMEOUT
is not a wait for input either: its program wakes by itself that soon to do something else (a loop that reads
input when there is some, and works meanwhile).

`confirmed` cross-checks each reader's `/proc/<pid>/task/<tid>/wchan` (`wait_woken`, `anon_pipe_read`,
`poll_schedule_timeout`: a wait; a lock's name or 0: not one).

`quiet` says every other thread of the task sleeps where nothing can come of it without an event from outside:
waiting for a child, or stopped. A task that is quiet and blocked on its input waits for it for certain; one
that is not (a timer, another thread at work) only once its output has stayed still a moment
(processes/input_watch.py).
"""

from __future__ import annotations

import os
import platform
import stat
from dataclasses import dataclass

# The system call numbers that read or wait on input, and those that wait for a child, per architecture.
_READS = {"x86_64": {0: "read", 19: "readv", 7: "poll", 271: "ppoll", 23: "select", 270: "pselect6",
                     232: "epoll_wait", 281: "epoll_pwait", 441: "epoll_pwait2"},
          "aarch64": {63: "read", 65: "readv", 73: "ppoll", 72: "pselect6", 22: "epoll_pwait", 441: "epoll_pwait2"}}
_CHILD_WAITS = {"x86_64": {61, 247, 130}, "aarch64": {260, 95, 133}}  # wait4, waitid, rt_sigsuspend
_DEV_TTY = os.makedev(5, 0)
_POLLIN = 0x1 | 0x2 | 0x40  # POLLIN | POLLPRI | POLLRDNORM
_EPOLLIN = 0x1
_MAX_FDS = 4096  # a poll set or select bitmap larger than this is not read
MIN_TIMEOUT = 1.0  # seconds: a shorter timed wait on the input is a loop at work, not a wait for input
# Where each waiting call keeps its timeout: (argument, how): "ms" an int of milliseconds (negative: none),
# "timespec"/"timeval" a pointer (NULL: none). read and readv have none.
_TIMEOUTS = {"poll": (2, "ms"), "ppoll": (2, "timespec"), "select": (4, "timeval"), "pselect6": (4, "timespec"),
             "epoll_wait": (3, "ms"), "epoll_pwait": (3, "ms"), "epoll_pwait2": (3, "timespec")}


@dataclass(frozen=True)
class Target:
    """What the task's input is: a pipe (its filesystem device and inode) or a terminal (its device number)."""

    pipe: tuple[int, int] | None = None
    terminal: int | None = None

    def is_it(self, st: os.stat_result, tty_nr: int) -> bool:
        if self.pipe is not None:
            return stat.S_ISFIFO(st.st_mode) and (st.st_dev, st.st_ino) == self.pipe
        if not stat.S_ISCHR(st.st_mode):
            return False
        return st.st_rdev == self.terminal or (st.st_rdev == _DEV_TTY and tty_nr == self.terminal)


def pipe_target(fd: int) -> Target:
    st = os.fstat(fd)
    return Target(pipe=(st.st_dev, st.st_ino))


def terminal_target(slave: int) -> Target:
    return Target(terminal=os.fstat(slave).st_rdev)


@dataclass(frozen=True)
class Reading:
    """One look: the (pid, tid) of each thread blocked on the input, whether everything else is quiet, and
    whether /proc could tell at all."""

    readers: tuple[tuple[int, int], ...] = ()
    quiet: bool = False
    known: bool = True
    # Each reader's wchan names a wait (not a lock it sleeps on while it returns from the call with the input
    # taken, nor 0: it runs): the kernel's own word that it waits.
    confirmed: bool = False


UNKNOWN = Reading(known=False)


def read_task(leader: int, target: Target, foreground: int | None = None) -> Reading:
    """Look at the task whose shell is `leader` (its descendants through /proc's children lists). For a
    terminal, `foreground` is its foreground process group (tcgetpgrp of the master)."""
    calls = _READS.get(platform.machine())
    if calls is None:
        return UNKNOWN
    waits = _CHILD_WAITS[platform.machine()]
    readers: list[tuple[int, int]] = []
    quiet = True
    for pid in _descendants(leader):
        facts = _stat(pid)
        if facts is None:
            continue  # gone meanwhile
        state, pgrp, tty_nr = facts
        if state in "ZXx":
            continue
        if state in "Tt":
            continue  # stopped: writes nothing until continued
        for tid in _threads(pid):
            syscall = _syscall(pid, tid)
            if syscall is None:
                return UNKNOWN
            number, args = syscall
            name = calls.get(number)
            how = _reads_target(pid, name, args, target, tty_nr) if name is not None and (
                foreground is None or pgrp == foreground) else None
            if how is not None:
                readers.append((pid, int(tid)))
                quiet = quiet and how == ALONE  # (a timer of its own may fire: the output settles first)
            elif number not in waits:
                quiet = False
    return Reading(tuple(readers), quiet and bool(readers), confirmed=bool(readers) and all(
        _waits(pid, tid) for pid, tid in readers))


_NOT_WAITS = (b"mutex", b"rwsem", b"lock", b"down_", b"preempt")


def _waits(pid: int, tid: int) -> bool:
    """Whether the thread's wchan names a wait rather than a lock or nothing."""
    name = (_proc_text(f"/proc/{pid}/task/{tid}/wchan") or b"0").strip()
    return name != b"0" and not any(part in name for part in _NOT_WAITS)


def _descendants(leader: int) -> list[int]:
    """The leader and its descendants (each thread's children list; a process gone meanwhile has none)."""
    found, stack = [], [leader]
    while stack:
        pid = stack.pop()
        found.append(pid)
        for tid in _threads(pid):
            text = _proc_text(f"/proc/{pid}/task/{tid}/children")
            if text:
                stack.extend(int(x) for x in text.split())
    return found


def _threads(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def _proc_text(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, controlling terminal) from /proc/<pid>/stat."""
    text = _proc_text(f"/proc/{pid}/stat")
    if not text:
        return None
    fields = text[text.rfind(b")") + 2:].split()
    try:
        return fields[0].decode(), int(fields[2]), int(fields[4])
    except (IndexError, ValueError):
        return None


def _syscall(pid: int, tid: str) -> tuple[int, list[int]] | None:
    """(number, arguments) of the call a thread sleeps in; (-1, []) when it runs or is in none; None when the
    file cannot be read (permission, or a kernel without it)."""
    try:
        fd = os.open(f"/proc/{pid}/task/{tid}/syscall", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return -1, []  # the thread is gone
    except OSError:
        return None
    try:
        text = os.read(fd, 512)
    except OSError:
        return None
    finally:
        os.close(fd)
    fields = text.split()
    if not fields or fields[0] == b"running" or len(fields) < 7:
        return -1, []
    return int(fields[0]), [int(x, 16) for x in fields[1:7]]


ALONE, WITH_WAKEUPS = "alone", "with wakeups"


def _reads_target(pid: int, name: str, args: list[int], target: Target, tty_nr: int) -> str | None:
    """ALONE: the call waits for the input only; WITH_WAKEUPS: for it and for the process's own event
    descriptors (eventfd, signalfd, timerfd: an event loop's); None: not for it, or for something from
    outside as well (a socket, another pipe or terminal: a network client waits for its peer too)."""
    if not _long_wait(pid, name, args):
        return None
    kinds = [_fd_kind(pid, fd, target, tty_nr) for fd in _read_set(pid, name, args)]
    if "input" not in kinds or "other" in kinds:
        return None
    return WITH_WAKEUPS if "wakeup" in kinds else ALONE


def _long_wait(pid: int, name: str, args: list[int]) -> bool:
    """Whether the call waits without a timeout, or with one of MIN_TIMEOUT or more."""
    where = _TIMEOUTS.get(name)
    if where is None:
        return True
    value, how = args[where[0]], where[1]
    if how == "ms":
        ms = value - (1 << 64) if value >= 1 << 63 else value  # the register holds a C int, sign-extended or not
        ms = ms - (1 << 32) if ms >= 1 << 31 else ms
        return ms < 0 or ms >= MIN_TIMEOUT * 1000
    if not value:
        return True
    raw = _memory(pid, value, 16)
    if len(raw) < 16:
        return False
    seconds, fraction = int.from_bytes(raw[:8], "little", signed=True), int.from_bytes(raw[8:], "little")
    return seconds + fraction / (1e9 if how == "timespec" else 1e6) >= MIN_TIMEOUT


def _read_set(pid: int, name: str, args: list[int]) -> list[int]:
    """The descriptors the call waits to read."""
    if name in ("read", "readv"):
        return [args[0]]
    if name in ("poll", "ppoll"):
        count = min(args[1], _MAX_FDS)
        raw = _memory(pid, args[0], 8 * count)
        fds = [int.from_bytes(raw[i:i + 4], "little", signed=True) for i in range(0, len(raw) - 7, 8)
               if int.from_bytes(raw[i + 4:i + 6], "little") & _POLLIN]
        return [fd for fd in fds if fd >= 0]
    if name in ("select", "pselect6"):
        count = min(args[0], _MAX_FDS)
        if not args[1] or not count:
            return []
        raw = _memory(pid, args[1], (count + 63) // 64 * 8)
        bits = int.from_bytes(raw, "little")
        return [fd for fd in range(min(count, len(raw) * 8)) if bits >> fd & 1]
    return _epoll_set(pid, args[0])


def _memory(pid: int, address: int, size: int) -> bytes:
    if not address or size <= 0:
        return b""
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.pread(fd, size, address)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _epoll_set(pid: int, epfd: int) -> list[int]:
    text = _proc_text(f"/proc/{pid}/fdinfo/{epfd}") or b""
    fds = []
    for line in text.splitlines():
        if line.startswith(b"tfd:"):
            parts = line.split()
            try:
                if int(parts[3], 16) & _EPOLLIN:
                    fds.append(int(parts[1]))
            except (IndexError, ValueError):
                continue
    return fds


def _fd_kind(pid: int, fd: int, target: Target, tty_nr: int) -> str:
    """"input", "wakeup" (an anonymous inode: eventfd, signalfd, timerfd, epoll) or "other"."""
    path = f"/proc/{pid}/fd/{fd}"
    try:
        if target.is_it(os.stat(path), tty_nr):
            return "input"
        return "wakeup" if os.readlink(path).startswith("anon_inode:") else "other"
    except OSError:
        return "other"
