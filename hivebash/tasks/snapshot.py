"""`TaskSnapshot`: a consistent snapshot of one task, taken under the registry's lock, with what its answer shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hivebash import output_views as ov
from hivebash.tasks.task import Task

if TYPE_CHECKING:
    from hivebash.disk.store import Tail


@dataclass
class TaskSnapshot:
    """A consistent snapshot of one task, taken under the lock, plus its output tails."""

    task: Task
    duration: float | None
    queue_position: int | None = None
    stdout: Tail | None = None
    stderr: Tail | None = None
    leftovers: list[int] = field(default_factory=list)
    output: ov.View | None = None  # what the model reads of the output: the tails, or the view asked for
    unsaved: str | None = None  # why its end is not on disk (TaskEntry.unsaved)
    failures: list[ov.Line] = field(default_factory=list)  # a failed task's error-looking lines above its tails
    asking: str | None = None  # it waits for input: its prompt (the unfinished last line; "" for none)

    def to_dict(self) -> dict[str, Any]:
        t, r = self.task, self.task.result
        data: dict[str, Any] = {
            "id": t.id,
            "status": t.state,
            "cmd": t.cmd,
            "cwd": t.cwd,
            "stdin": t.stdin,
            "exit_code": r.exit_code if r else None,
            "signal": r.signal if r else None,
            "duration": None if self.duration is None else round(self.duration, 3),
            "timeout_secs": t.timeout_secs,
            "submitted_at": t.submitted_at,
            "started_at": t.started_at,
            "ended_at": r.ended_at if r else None,
            "pid": t.pid,
            "note": r.note if r else None,
            "rusage": None,
            "leftover_pids": list(self.leftovers),
        }
        if self.unsaved is not None:
            data["end_saved"], data["end_unsaved_reason"] = False, self.unsaved
        if r and r.rusage:
            data["rusage"] = {
                "cpu_seconds": round(r.rusage.cpu_seconds, 3),
                "cpu_user": round(r.rusage.cpu_user, 3),
                "cpu_system": round(r.rusage.cpu_system, 3),
                # Only the task's own peak (see Rusage.max_rss_exact); else it is the daemon's, and left out.
                "max_rss_bytes": r.rusage.max_rss_bytes if r.rusage.max_rss_exact else None,
            }
        if self.asking is not None:
            data["waiting_for_input"] = self.asking
        if self.queue_position is not None:
            data["queue_position"] = self.queue_position
        for stream, tail in (("stdout", self.stdout), ("stderr", self.stderr)):
            if tail is not None:
                data[stream] = tail.to_dict() | (ov.gap_data(t.dropped, stream, tail.size) or {})
        if self.output is not None and "streams" in self.output.data and (
                "grep" in self.output.data or "from_line" in self.output.data):
            data["view"] = self.output.data
        return data
