"""The one seam between both daemons and the kernel's processes: spawn a leader in a session of its own, learn
of its exit without reaping it, reap it, signal its group, find its tree, stop identified processes.

The bash engine and its workers (through hivebash/processes/ops.py, which adds the task-marker searches), the
bash daemon's reaper and the subagent's turn runner reach processes only through a `ProcessOps`;
`LinuxProcessOps` does it for real, tests pass a recording fake (tests/kit/fake_ops.py) to walk the kill paths
without processes or races.

Facts this is built on (docs/design.md, "Linux processes"):
- `preexec_fn` is unsafe in a threaded process: a new session comes from `start_new_session=True`.
- A group id stays reserved while its leader is an unreaped zombie: the exit is observed without reaping (a
  readable pidfd), the group swept, and only then the leader reaped (`reap`, wait4). The group id recorded at
  spawn is used for every signal, never `os.getpgid`.
- Signals to identified processes go through pidfds opened after checking the process's start time, so a
  recycled pid can never receive a signal meant for one of ours (`ProcSet`).
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

import psutil

log = logging.getLogger(__name__)

# After SIGKILL, how long to wait for the processes to be gone before going on anyway (a process stuck in
# uninterruptible sleep must not hold a task's end back; its timeout promise is deadline+grace+100 ms).
_AFTER_SIGKILL_WAIT = 0.05


@dataclass(frozen=True)
class ProcInfo:
    """A live process identified as ours: the pid plus its start time, which together name it; `marker` is the
    bash task it belongs to ("" for a process found as a descendant); `pgid` its group when it was found, where
    the search read it (a fact of that moment, not part of its name)."""

    pid: int
    create_time: float
    marker: str = ""
    pgid: int | None = field(default=None, compare=False)


class Leader(Protocol):
    """A spawned leader (a subprocess.Popen for real)."""

    pid: int
    returncode: int | None  # set by `reap`
    stdout: IO[bytes] | None  # the read end when spawned with stdout=subprocess.PIPE


class ProcessOps(Protocol):
    def spawn(self, argv: list[str], *, stdin: Any, stdout: Any, stderr: Any, cwd: Any, env: Any,
              executable: str | None = None, pass_fds: tuple[int, ...] = ()) -> Leader:
        """Start the leader in a new session (its pid is its group id). Raises OSError."""

    def exit_fd(self, leader: Leader) -> int:
        """A descriptor that turns readable once the leader has exited (still unreaped); the caller closes it."""

    def reap(self, leader: Leader) -> tuple[int, Any]:
        """Wait for the exited leader: (wait status, rusage with ru_utime, ru_stime, ru_maxrss)."""

    def signal_group(self, pgid: int, signum: int) -> bool:
        """Signal a group by the id recorded at spawn; False if it is gone (no error)."""

    def tree(self, pid: int) -> list[ProcInfo]:
        """The live descendants of `pid`, sessions of their own included."""

    def stop(self, procs: Iterable[ProcInfo], force: bool, deadline: float, wake_fd: int | None = None,
             escalate: Callable[[], bool] | None = None) -> None:
        """SIGTERM (SIGKILL when `force`), SIGKILL what is left at `deadline` (`stop_processes`)."""

    def is_alive(self, info: ProcInfo) -> bool: ...


class LinuxProcessOps:
    """The real processes."""

    def spawn(self, argv: list[str], *, stdin: Any, stdout: Any, stderr: Any, cwd: Any, env: Any,
              executable: str | None = None, pass_fds: tuple[int, ...] = ()) -> subprocess.Popen[bytes]:
        # start_new_session, never preexec_fn: the daemons are threaded.
        return subprocess.Popen(argv, executable=executable, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd,
                                env=env, start_new_session=True, close_fds=True, pass_fds=pass_fds)

    def exit_fd(self, leader: Leader) -> int:
        return os.pidfd_open(leader.pid)

    def reap(self, leader: Leader) -> tuple[int, Any]:
        _, status, usage = os.wait4(leader.pid, 0)
        leader.returncode = status  # so Popen never polls this pid again (a recycled pid would be reaped)
        return status, usage

    def signal_group(self, pgid: int, signum: int) -> bool:
        try:
            os.killpg(pgid, signum)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:  # never ours to touch; say so in the log rather than fail a call
            log.warning("no permission to signal process group %d", pgid)
            return False

    def tree(self, pid: int) -> list[ProcInfo]:
        found = []
        try:
            children = psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            return []
        for child in children:
            try:
                found.append(ProcInfo(child.pid, child.create_time()))
            except psutil.Error:
                continue
        return found

    def stop(self, procs: Iterable[ProcInfo], force: bool, deadline: float, wake_fd: int | None = None,
             escalate: Callable[[], bool] | None = None) -> None:
        stop_processes(procs, force, deadline, wake_fd, escalate)

    def is_alive(self, info: ProcInfo) -> bool:
        return is_alive(info)


def stop_tree(ops: ProcessOps, pid: int, pgid: int, rounds: int = 3) -> int:
    """SIGKILL a leader's group and every descendant of the leader, those in sessions of their own too (the
    one tree-kill of both daemons). The descendants are found before the group dies (they would be re-parented
    away); what each forked meanwhile is found from it before it is killed, for up to `rounds` rounds. Returns
    how many descendants were signalled. A process that daemonised itself before the first look is out of
    reach: only a cgroup reaches that."""
    held = ops.tree(pid)
    ops.signal_group(pgid, signal.SIGKILL)
    seen: set[int] = set()
    killed = 0
    for _ in range(rounds):
        held = [p for p in held if p.pid not in seen]
        if not held:
            break
        found = [child for p in held for child in ops.tree(p.pid)]
        ops.stop(held, force=True, deadline=time.monotonic() + _AFTER_SIGKILL_WAIT)
        seen.update(p.pid for p in held)
        killed += len(held)
        held = found
    return killed


class ProcSet:
    """Identified processes held by pidfds: signal them and wait for them without any pid-reuse race."""

    def __init__(self, procs: Iterable[ProcInfo]):
        self.fds: dict[int, ProcInfo] = {}
        for info in procs:
            try:
                fd = os.pidfd_open(info.pid)
            except OSError:
                continue  # already gone
            try:
                same = psutil.Process(info.pid).create_time() == info.create_time
            except psutil.Error:
                same = False
            if same:
                self.fds[fd] = info
            else:
                os.close(fd)

    def __len__(self) -> int:
        return len(self.fds)

    def signal(self, signum: int) -> None:
        for fd in list(self.fds):
            try:
                signal.pidfd_send_signal(fd, signum)
            except ProcessLookupError:
                pass

    def wait(self, deadline: float, wake_fd: int | None = None) -> str:
        """Wait until every process has exited ("gone"), the monotonic `deadline` passes ("deadline"), or
        `wake_fd` becomes readable ("woken")."""
        poller = select.poll()
        for fd in self.fds:
            poller.register(fd, select.POLLIN)
        if wake_fd is not None:
            poller.register(wake_fd, select.POLLIN)
        pending = set(self.fds)
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "deadline"
            for fd, _ in poller.poll(remaining * 1000):
                if fd == wake_fd:
                    return "woken"
                pending.discard(fd)
                poller.unregister(fd)
        return "gone"

    def alive(self) -> list[ProcInfo]:
        gone = set()
        poller = select.poll()
        for fd in self.fds:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(0):
            gone.add(fd)
        return [info for fd, info in self.fds.items() if fd not in gone]

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()


def stop_processes(procs: Iterable[ProcInfo], force: bool, deadline: float, wake_fd: int | None = None,
                   escalate: Callable[[], bool] | None = None) -> None:
    """SIGTERM (or SIGKILL when `force`), wait until `deadline`, then SIGKILL whatever is left.

    `wake_fd` readable and `escalate()` true (a forced kill arrived during the grace): SIGKILL at once.
    """
    held = ProcSet(procs)
    try:
        if not held:
            return
        if not force:
            held.signal(signal.SIGTERM)
            while True:
                outcome = held.wait(deadline, wake_fd)
                if outcome == "gone":
                    return
                if outcome == "deadline":
                    break
                drain_eventfd(wake_fd)
                if escalate is not None and escalate():
                    break
        held.signal(signal.SIGKILL)
        held.wait(time.monotonic() + _AFTER_SIGKILL_WAIT)
    finally:
        held.close()


def drain_eventfd(fd: int | None) -> None:
    if fd is None:
        return
    try:
        os.eventfd_read(fd)
    except BlockingIOError:
        pass


def is_alive(info: ProcInfo) -> bool:
    """True if the process named by (pid, start time) still runs (a zombie does not)."""
    try:
        proc = psutil.Process(info.pid)
        return proc.create_time() == info.create_time and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
