"""Signalling one claude turn: its process group, and the tool processes that left the group.

Claude's Bash tool runs each command in a new session (seen with 2.1.328: `bash -c ...` has its own
pgid/sid), so a signal to claude's group never reaches it. On SIGINT claude stops its tools itself; after
SIGKILL it cannot, and `sleep` & co. would be orphaned and run on (observed). So a forced stop first takes a
snapshot of claude's descendants (psutil, which identifies a process by pid AND start time, so a recycled pid
is never signalled), kills claude's group, then kills every descendant in the snapshot and what they spawned.
A process that daemonised itself before the snapshot is out of reach: only the unit's cgroup reaches that.

Every function takes the pgid recorded at spawn. The caller guarantees the group leader is not yet reaped
(an unreaped zombie keeps its pgid reserved), so a signal can never hit a stranger's recycled group.
"""

from __future__ import annotations

import logging
import os
import signal

import psutil

log = logging.getLogger(__name__)


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send `sig` to the group; False if it no longer exists."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:  # never ours to touch; say so in the log rather than crash a tool call
        log.warning("no permission to signal process group %d", pgid)
        return False


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def kill_tree(pid: int, pgid: int, rounds: int = 3) -> int:
    """SIGKILL claude's group and every descendant of claude, including those in sessions of their own.

    Returns how many descendants outside the group were signalled (for the log)."""
    snapshot = {p.pid: p for p in descendants(pid)}
    signal_group(pgid, signal.SIGKILL)
    killed = 0
    for _ in range(rounds):
        found: dict[int, psutil.Process] = {}
        for proc in list(snapshot.values()):
            try:
                found.update((c.pid, c) for c in proc.children(recursive=True))
            except psutil.Error:
                pass
            try:
                proc.kill()  # psutil re-checks identity (pid + start time) before signalling
                killed += 1
            except psutil.Error:
                pass
        snapshot = {k: v for k, v in found.items() if k not in snapshot}
        if not snapshot:
            break
    return killed
