"""--max-state-bytes: every output file of the state directory together stays under a quota.

When the outputs pass it, a housekeeping pass frees them down to QUOTA_LOW of it: the oldest finished tasks'
outputs go first (their files are emptied; their records stay, saying the output was pruned for space:
`Task.output_pruned`), then the middles of the largest running ones (the output guard punches them, as past
--max-output-bytes, keeping each one's head and its newest SQUEEZE_TAIL bytes). The pass logs what it freed.

Cost: the guard, which looks at every running file anyway (disk/output_limit.py), adds their blocks to what the
finished ones held at the last pass (plus what each end added) and rings the housekeeper when the sum passes the
quota, at most once a RING_GAP (a task's end does too); the files of finished tasks are looked at (one fstat
each) only in a pass.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from common.config import STATE_SHARE as _SHARE
from common.humanize import human_bytes

if TYPE_CHECKING:
    from hivebash.verbs.rooms import Rooms

log = logging.getLogger(__name__)

QUOTA_LOW = 0.9  # a pass frees the outputs down to this share of the quota, so it does not run again at once
RING_GAP = 1.0  # seconds between two rings of the housekeeper by the guard


def quota_bytes(text: str, state_dir: Path) -> int:
    """The quota in bytes (0: none): a share is of the state filesystem's size."""
    share = _SHARE.fullmatch(text.strip())
    if not share:
        return int(text)
    info = os.statvfs(state_dir)
    return int(info.f_blocks * info.f_frsize * float(share.group(1)) / 100)


class StateQuota:
    """What the outputs held at the last pass, and when the guard may ring the housekeeper again."""

    def __init__(self, quota: int, ring: Callable[[], None], clock: Callable[[], float] = time.monotonic):
        self.quota = quota
        self.ring = ring
        self.clock = clock
        self.finished = 0  # bytes on disk of finished tasks' outputs: the last pass's count plus the ends since
        self._rung = float("-inf")
        self._lock = threading.Lock()  # guards finished

    def ended(self, on_disk: int) -> None:
        """A task ended with `on_disk` bytes of output (ends that pass the quota ring the housekeeper too)."""
        with self._lock:
            self.finished += on_disk
        self.running(0)

    def running(self, on_disk: int) -> None:
        """The guard's count of the running tasks' outputs: ring the housekeeper when all pass the quota."""
        if self.quota and self.finished + on_disk > self.quota and self.clock() - self._rung >= RING_GAP:
            self._rung = self.clock()
            self.ring()

    def over(self, running: int) -> bool:
        return bool(self.quota) and self.finished + running > self.quota


def _blocks(path: str) -> int:
    try:
        return os.stat(path, follow_symlinks=False).st_blocks * 512
    except OSError:
        return 0


def enforce(rooms: Rooms, full: bool) -> None:
    """One housekeeping pass of the quota; without `full` (a task end, a ring) only when the counts say the
    outputs passed it (no file looked at)."""
    quota, guard = rooms.lifecycle.quota, rooms.lifecycle.guard
    if not quota.quota or not (full or quota.over(guard.on_disk())):
        return
    store = rooms.store
    with rooms.registry.locked() as tasks:
        finished = sorted((e for e in tasks.entries() if e.task.ended),
                          key=lambda e: (e.task.result.ended_at if e.task.result else e.task.submitted_at, e.task.seq))
    held = [(e, [store.file(e.id, "out"), store.file(e.id, "err")]) for e in finished]
    sizes = [sum(_blocks(p) for p in paths) for _, paths in held]
    with quota._lock:
        quota.finished = sum(sizes)
    total = quota.finished + guard.on_disk()
    if total <= quota.quota:
        return
    target = int(quota.quota * QUOTA_LOW)
    pruned, freed = [], 0
    reason = f"pruned for space: the outputs passed --max-state-bytes {human_bytes(quota.quota)}"
    for (entry, paths), size in zip(held, sizes, strict=True):
        if total - freed <= target:
            break
        if not size or entry.leftovers:  # (leftovers still write to them)
            continue
        record = rooms.lifecycle.prune_output(entry, paths, reason)
        if record is not None:
            pruned.append(entry.id)
            freed += size
    with quota._lock:
        quota.finished -= freed
    squeezed = guard.squeeze(total - freed - target, quota.quota) if total - freed > target else 0
    log.warning("--max-state-bytes %s: outputs held %s; freed %s: the outputs of %d finished task(s)%s and %s "
                "from the middles of running ones", human_bytes(quota.quota), human_bytes(total),
                human_bytes(freed + squeezed), len(pruned), f" ({' '.join(pruned[:20])})" if pruned else "",
                human_bytes(squeezed))
