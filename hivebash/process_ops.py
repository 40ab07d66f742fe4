"""The seam between the daemon and the kernel's processes: spawn a task's leader, learn of its exit, reap it,
signal its group, and find, signal and stop a task's other processes.

The engine and every task's worker reach processes only through a `ProcessOps`. `LinuxProcessOps` does it
for real (os.killpg, pidfds, wait4, and psutil through processes.py); tests pass a recording fake
(tests/kit/fake_ops.py) to walk the kill, cancel, timeout and leftover paths without processes or races.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from .processes import ProcInfo, ProcSet, find_processes, is_alive, orphan_children, stop_processes


class Leader(Protocol):
    """A spawned task leader (a subprocess.Popen for real)."""

    pid: int
    returncode: int | None  # set by `reap`


class ProcessOps(Protocol):
    def spawn(self, argv: list[str], executable: str, stdin: int, stdout: int, stderr: int, cwd: str,
              env: dict[bytes, bytes]) -> Leader:
        """Start the leader in a new session (its pid is its group id). Raises OSError."""

    def exit_fd(self, leader: Leader) -> int:
        """A descriptor that turns readable once the leader has exited (still unreaped); the caller closes it."""

    def reap(self, leader: Leader) -> tuple[int, Any]:
        """Wait for the exited leader: (wait status, rusage with ru_utime, ru_stime, ru_maxrss)."""

    def signal_group(self, pgid: int, signum: int) -> None:
        """Signal a group by the id recorded at spawn; a group that is gone is no error."""

    def signal(self, procs: list[ProcInfo], signum: int) -> None:
        """Signal identified processes (never a recycled pid)."""

    def find(self, markers: dict[str, int | None], descendants_only: bool, exclude: Iterable[int] = (),
             leaders: dict[int, str] | None = None, fresh_after: float | None = None) -> dict[str, list[ProcInfo]]:
        """The live processes of each task by marker (processes.find_processes)."""

    def stop(self, procs: Iterable[ProcInfo], force: bool, deadline: float, wake_fd: int | None = None,
             escalate: Callable[[], bool] | None = None) -> None:
        """SIGTERM (SIGKILL when `force`), SIGKILL what is left at `deadline` (processes.stop_processes)."""

    def is_alive(self, info: ProcInfo) -> bool: ...

    def orphans(self, fresh_after: float | None = None) -> list[int] | None:
        """Pids re-parented to this subreaper, or None if the kernel does not say."""


class LinuxProcessOps:
    """The real processes."""

    def spawn(self, argv: list[str], executable: str, stdin: int, stdout: int, stderr: int, cwd: str,
              env: dict[bytes, bytes]) -> subprocess.Popen:
        # start_new_session, never preexec_fn: the daemon is threaded.
        return subprocess.Popen(argv, executable=executable, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd,
                                env=env, start_new_session=True, close_fds=True)

    def exit_fd(self, leader: Leader) -> int:
        return os.pidfd_open(leader.pid)

    def reap(self, leader: Leader) -> tuple[int, Any]:
        _, status, usage = os.wait4(leader.pid, 0)
        leader.returncode = status  # so Popen never polls this pid again (a recycled pid would be reaped)
        return status, usage

    def signal_group(self, pgid: int, signum: int) -> None:
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            pass

    def signal(self, procs: list[ProcInfo], signum: int) -> None:
        held = ProcSet(procs)
        try:
            held.signal(signum)
        finally:
            held.close()

    find = staticmethod(find_processes)
    stop = staticmethod(stop_processes)
    is_alive = staticmethod(is_alive)
    orphans = staticmethod(orphan_children)
