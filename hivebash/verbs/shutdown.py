"""The shutdown verb: stop everything this daemon started. Running tasks are stopped as by a forced kill
(recorded `interrupted`), pending ones cancelled (`interrupted`), leftovers of finished tasks killed."""

from __future__ import annotations

import time

from common.process_seam import ProcInfo
from hivebash.processes.task_processes import stop_until_none_found
from hivebash.tasks import task as T
from hivebash.verbs.rooms import Rooms
from hivebash.verbs.run import SHUT_DOWN_PENDING


def shut_down(rooms: Rooms, timeout: float) -> None:
    with rooms.registry.locked() as tasks:
        tasks.closing = True
        ended = [tasks.cancel(entry, T.INTERRUPTED, SHUT_DOWN_PENDING) for entry in list(tasks.queue)]
        started = [e for e in tasks.started.values() if e.runner is not None]
        for entry in started:
            tasks.request_stop(entry, "SIGKILL")
        runners = [e.runner for e in started if e.runner is not None]
    rooms.lifecycle.record_ends(ended)
    deadline = time.monotonic() + timeout
    for r in runners:
        r.join(max(0.0, deadline - time.monotonic()))
    markers: dict[str, int | None] = {m: None for m in rooms.our_markers()}
    if markers:
        def leftovers() -> list[ProcInfo]:
            found = rooms.ops.find(markers, rooms.subreaper, leaders=rooms.reaper.leaders())
            return [p for ps in found.values() for p in ps]

        def stop(procs: list[ProcInfo]) -> None:
            rooms.reaper.remember(procs)
            rooms.ops.stop(procs, force=True, deadline=time.monotonic() + 0.5)

        stop_until_none_found(leftovers, stop)
    rooms.reaper.reap(rooms.our_markers)
