"""What `run`, `status`, `kill` and `list` answer: consistent snapshots of tasks, and their text and data.

Every result is formatted twice from one view: `text` for the model, a first line of stable key=value facts
and then the output tails verbatim; `data`, the exact structured form for programmatic callers (the CLI's
--json).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from common.humanize import human_age, human_bytes, one_line
from common.tools import ToolResult
from common.waiting import WaitWindow

from . import task as T
from .store import Tail, TaskStore
from .task import Task



@dataclass
class TaskView:
    """A consistent snapshot of one task, taken under the lock, plus its output tails."""

    task: Task
    duration: float | None
    queue_position: int | None = None
    stdout: Tail | None = None
    stderr: Tail | None = None
    leftovers: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        t, r = self.task, self.task.result
        data: dict[str, Any] = {
            "id": t.id,
            "status": t.state,
            "cmd": t.cmd,
            "cwd": t.cwd,
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
        if r and r.rusage:
            data["rusage"] = {
                "cpu_seconds": round(r.rusage.cpu_seconds, 3),
                "cpu_user": round(r.rusage.cpu_user, 3),
                "cpu_system": round(r.rusage.cpu_system, 3),
                "max_rss_bytes": r.rusage.max_rss_bytes,
                "max_rss_exact": r.rusage.max_rss_exact,
            }
        if self.queue_position is not None:
            data["queue_position"] = self.queue_position
        if self.stdout is not None:
            data["stdout"] = self.stdout.to_dict()
        if self.stderr is not None:
            data["stderr"] = self.stderr.to_dict()
        return data


def read_tails(view: TaskView, store: TaskStore, limit: int) -> None:
    """Attach the output tails to a snapshot (outside the engine's lock: these are file reads)."""
    task_id = view.task.id
    if view.task.state == T.PENDING:
        # Nothing has written to a pending task's files (prepare made them empty; no process yet): no reads.
        # Under load each file syscall of a request thread waits for the GIL again when it returns.
        view.stdout, view.stderr = store.empty_tail(task_id, "out"), store.empty_tail(task_id, "err")
    else:
        view.stdout = store.tail(task_id, "out", limit)
        view.stderr = store.tail(task_id, "err", limit)


@dataclass
class Outcome:
    """What `run` or `status` answers: the view, and how the inline wait went."""

    view: TaskView
    window: WaitWindow
    waited: float
    wait_skipped: bool = False  # every wait slot was taken: answered at once


@dataclass
class KillOutcome:
    view: TaskView
    action: str  # "cancelled", "signalled", "leftovers", "nothing"
    message: str



# ----- formatting ----------------------------------------------------------------------------------------------


def facts_line(view: TaskView) -> str:
    """The stable first line: id, status, exit code / signal, duration, resources."""
    t, r = view.task, view.task.result
    facts = [f"id={t.id}", f"status={t.state}"]
    if r and r.exit_code is not None:
        facts.append(f"exit_code={r.exit_code}")
    if r and r.signal:
        facts.append(f"signal={r.signal}")
    if view.duration is not None:
        facts.append(f"duration={view.duration:.2f}s")
    if r and r.rusage:
        bound = "=" if r.rusage.max_rss_exact else "<="  # see Rusage.max_rss_exact
        facts.append(f"cpu={r.rusage.cpu_seconds:.2f}s max_rss{bound}{human_bytes(r.rusage.max_rss_bytes)}")
    if view.queue_position:
        facts.append(f"queue_position={view.queue_position}")
    if view.leftovers:
        facts.append(f"leftover_processes={len(view.leftovers)}")
    return " ".join(facts)


def _tail_block(label: str, tail: Tail | None) -> str:
    if tail is None or tail.size == 0:
        return f"--- {label}: empty ---\n"
    if tail.elided:
        head = (f"--- {label}: last {tail.shown} of {tail.size} bytes ({tail.elided} bytes elided; "
                f"full output: Read({tail.path})) ---")
    else:
        head = f"--- {label} ({tail.size} bytes, {tail.path}) ---"
    text = tail.text if tail.text.endswith("\n") else tail.text + "\n(no newline at end)\n"
    return f"{head}\n{text}"


def status_text(view: TaskView, extra_facts: str = "") -> str:
    t, r = view.task, view.task.result
    lines = [facts_line(view) + extra_facts, f"cmd: {one_line(t.cmd, 400)}", f"cwd: {t.cwd}"]
    if t.timeout_secs:
        lines.append(f"timeout: {t.timeout_secs:g}s")
    if r and r.note:
        lines.append(f"note: {r.note}")
    if view.leftovers:
        lines.append(f"still alive: {len(view.leftovers)} process(es) of this task (pids "
                     f"{' '.join(map(str, view.leftovers))}); kill(id) stops them")
    if t.state == T.PENDING:
        lines.append("waiting for a free slot (the daemon's max_running); kill(id) cancels it")
    return "\n".join(lines) + "\n" + _tail_block("stdout", view.stdout) + _tail_block("stderr", view.stderr)


def wait_facts(outcome: Outcome) -> tuple[str, dict[str, Any]]:
    w = outcome.window
    data = {"asked": w.asked, "seconds": w.seconds, "capped": w.capped, "waited": round(outcome.waited, 3),
            "skipped": outcome.wait_skipped}
    text = ""
    if w.capped:
        text += f" wait_capped={w.seconds:g}s(asked {w.asked:g}s)"
    if outcome.wait_skipped:
        text += " wait_skipped=busy"
    return text, data


def outcome_result(outcome: Outcome, started_form: bool) -> ToolResult:
    """Full status when terminal (or not the run tool); else run's `task started: id=<id>` answer."""
    view = outcome.view
    facts, wait = wait_facts(outcome)
    data = view.to_dict() | {"wait": wait}
    if started_form and not view.task.terminal:
        data["started"] = True
        lines = [f"task started: id={view.task.id}",
                 f"status={view.task.state} waited={outcome.waited:.2f}s{facts}"]
        if outcome.window.capped:
            lines.append(f"(wait_seconds={outcome.window.asked:g} was capped at {outcome.window.seconds:g})")
        if outcome.wait_skipped:
            lines.append("(no inline wait: too many calls are waiting already)")
        lines.append(f"output: Read({view.stdout.path if view.stdout else ''}) Read({view.stderr.path if view.stderr else ''})")
        lines.append(f"It keeps running; its completion will surface as a todo. status(id=\"{view.task.id}\") checks it.")
        return ToolResult("\n".join(lines) + "\n", data)
    if started_form:
        data["started"] = False
    return ToolResult(status_text(view, facts), data)


def kill_result(outcome: KillOutcome) -> ToolResult:
    view = outcome.view
    text = f"id={view.task.id} action={outcome.action} status={view.task.state}\n{outcome.message}\n"
    return ToolResult(text, view.to_dict() | {"action": outcome.action, "message": outcome.message})


def list_result(views: list[TaskView], total: int, state: str | None) -> ToolResult:
    now = time.time()
    rows = []
    for v in views:
        r = v.task.result
        rows.append({"id": v.task.id, "status": v.task.state, "age_seconds": round(now - v.task.submitted_at, 1),
                     "exit_code": r.exit_code if r else None, "signal": r.signal if r else None,
                     "duration": None if v.duration is None else round(v.duration, 3), "cmd": one_line(v.task.cmd, 200)})
    head = f"tasks={total} shown={len(rows)}" + (f" state={state}" if state else "")
    if not rows:
        return ToolResult(head + "\n(no tasks)\n", {"total": total, "tasks": rows})
    width = max(len("ID"), *(len(r["id"]) for r in rows))
    lines = [head, f"{'ID':<{width}}  {'STATUS':<11}  {'AGE':>5}  {'EXIT':>4}  COMMAND"]
    for r in rows:
        code = "-" if r["exit_code"] is None else str(r["exit_code"])
        lines.append(f"{r['id']:<{width}}  {r['status']:<11}  {human_age(r['age_seconds']):>5}  {code:>4}  "
                     f"{one_line(r['cmd'], 60)}")
    return ToolResult("\n".join(lines) + "\n", {"total": total, "tasks": rows})
