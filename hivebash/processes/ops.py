"""The bash daemon's side of the process seam (common/process_seam.py): the searches only the bash daemon makes,
for the processes that carry a task's marker, and the orphans re-parented to it as a subreaper.

The engine and every task's worker reach processes only through a `TaskProcessOps`; `LinuxTaskProcessOps` does
it for real (psutil through processes/search.py); tests pass a recording fake (tests/kit/fake_ops.py) to walk the kill,
cancel, timeout and leftover paths without processes or races.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Protocol

from common.process_seam import LinuxProcessOps, ProcessOps, ProcInfo, ProcSet
from hivebash.processes.search import find_processes, orphan_children


class TaskProcessOps(ProcessOps, Protocol):
    def signal(self, procs: list[ProcInfo], signum: int) -> None:
        """Signal identified processes (never a recycled pid)."""

    def find(self, markers: dict[str, int | None], descendants_only: bool, exclude: Iterable[int] = (),
             leaders: dict[int, str] | None = None, fresh_after: float | None = None) -> dict[str, list[ProcInfo]]:
        """The live processes of each task by marker (processes.find_processes)."""

    def orphans(self, fresh_after: float | None = None) -> list[int] | None:
        """Pids re-parented to this subreaper, or None if the kernel does not say."""

    def watch(self, pid: int) -> int:
        """A pidfd of an identified orphan, readable once it dies (the caller closes it). Raises OSError."""

    def reap_orphan(self, pid: int) -> None:
        """Reap one identified zombie child by its pid (never `waitpid(-1)`)."""


class LinuxTaskProcessOps(LinuxProcessOps):
    """The real processes, and the real searches."""

    def signal(self, procs: list[ProcInfo], signum: int) -> None:
        held = ProcSet(procs)
        try:
            held.signal(signum)
        finally:
            held.close()

    def find(self, markers: dict[str, int | None], descendants_only: bool, exclude: Iterable[int] = (),
             leaders: dict[int, str] | None = None, fresh_after: float | None = None) -> dict[str, list[ProcInfo]]:
        return find_processes(markers, descendants_only, exclude, leaders, fresh_after)

    def orphans(self, fresh_after: float | None = None) -> list[int] | None:
        return orphan_children(fresh_after)

    def watch(self, pid: int) -> int:
        return os.pidfd_open(pid)

    def reap_orphan(self, pid: int) -> None:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
