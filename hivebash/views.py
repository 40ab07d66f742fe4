"""What `run`, `status`, `kill` and `list` answer: consistent snapshots of tasks, and their text and data.

Every result is formatted twice from one view: `text` for the model, a first line of stable key=value facts
and then the output tails verbatim; `data`, the exact structured form for programmatic callers (the CLI's
--json).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from common.humanize import human_age, human_bytes, one_line
from common.notices import NO_SOCKET, Notices
from common.tools import ToolResult
from common.waiting import WaitWindow

from . import output_views as ov
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
    output: ov.View | None = None  # what the model reads of the output: the tails, or the view asked for
    unsaved: str | None = None  # why its end is not on disk (TaskEntry.unsaved)

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
        if self.queue_position is not None:
            data["queue_position"] = self.queue_position
        if self.stdout is not None:
            data["stdout"] = self.stdout.to_dict()
        if self.stderr is not None:
            data["stderr"] = self.stderr.to_dict()
        if self.output is not None and "streams" in self.output.data and (
                "grep" in self.output.data or "from_line" in self.output.data):
            data["view"] = self.output.data
        return data


def read_output(view: TaskView, store: TaskStore, request: ov.ViewRequest | None = None,
                seen_to: dict[str, int] | None = None, tail_bytes: int | None = None) -> None:
    """Attach the output the answer shows (outside the engine's lock: these are file reads): the tails, or
    the view `request` asks for; `seen_to` is where the agent was shown each stream up to (new_only)."""
    task_id = view.task.id
    paths = {"stdout": store.file(task_id, "out"), "stderr": store.file(task_id, "err")}
    wanted = request.streams() if request else ov.STREAMS
    on_tty = view.task.stdin == "tty" and "stderr" in wanted  # stderr went to the terminal: all is in .out
    sources = [ov.Source(s, paths[s]) for s in wanted if not (on_tty and s == "stderr")]
    if view.task.state == T.PENDING:
        # Nothing has written to a pending task's files (prepare made them empty; no process yet): no reads.
        # Under load each file syscall of a request thread waits for the GIL again when it returns.
        view.output = ov.View("".join(f"--- {s.stream}: empty (not started) ---\n" for s in sources), {"streams": {}})
        view.stdout, view.stderr = store.empty_tail(task_id, "out"), store.empty_tail(task_id, "err")
        return
    view.output = ov.render(sources, request or ov.ViewRequest(), seen_to, tail_cap=tail_bytes)
    if on_tty:
        view.output.text += TTY_STDERR
    shown = view.output.data["streams"]
    for stream in ("stdout", "stderr"):
        got = shown.get(stream) if "text" in shown.get(stream, {}) else None
        if got is None:  # not part of this view: its size and path only
            tail = Tail(paths[stream], "", _size(paths[stream]), 0, _size(paths[stream]))
        else:
            shown_bytes = got["size"] - got["from_byte"] - got["elided_bytes"]
            tail = Tail(got["path"], got["text"], got["size"], shown_bytes, got["size"] - shown_bytes)
        setattr(view, stream, tail)


def _size(path: str) -> int:
    try:
        return os.stat(path, follow_symlinks=False).st_size
    except FileNotFoundError:
        return 0


TTY_STDERR = "--- stderr: none apart (stdin=tty: the terminal's output, stderr included, is all in stdout) ---\n"
STARTED_LINES = 10  # lines of each stream a `task started` answer shows
STARTED_BYTES = 1500


@dataclass
class Outcome:
    """What `run` or `status` answers: the view, and how the inline wait went."""

    view: TaskView
    window: WaitWindow
    waited: float
    wait_skipped: bool = False  # every wait slot was taken: answered at once
    wait_for: str | None = None  # the regex the wait also watched the output for
    matched: ov.Line | None = None  # the new line that matched it
    matched_id: str | None = None  # the task whose line it was
    truncated: list[str] = field(default_factory=list)  # watched streams found cut below the watch ("id stdout")
    notices: Notices = Notices(True)  # whether completions reach the agent as todos (a harness socket)


@dataclass
class ManyOutcome:
    """What `status(ids=[...])` answers: each task's snapshot, and how the wait went."""

    views: list[TaskView]
    first: Outcome  # the wait (window, waited, match) and the first task's view


@dataclass
class KillOutcome:
    view: TaskView
    action: str  # "cancelled", "signalled", "leftovers", "nothing"
    message: str



# ----- formatting ----------------------------------------------------------------------------------------------


def still_alive_line(task_id: str, pids: list[int]) -> str:
    """The processes a task left behind, and how to stop them (status answers and the completion todo)."""
    return (f"still alive: {len(pids)} process(es) of this task (pids {' '.join(map(str, pids))}); "
            f"kill(id=\"{task_id}\") stops them")


def unsaved_line(reason: str) -> str:
    """A task whose end could not be saved (Lifecycle.persist): what that means, and what to do."""
    full = "no space" in reason.lower()
    return (f"warning: the end is not saved: {'the state disk is full' if full else 'the state disk refused it'} "
            f"({reason}); a restart will report this task as interrupted. Free space in the state directory: "
            "the daemon saves it again within 30 s")


def facts_line(view: TaskView) -> str:
    """The stable first line: id, status, exit code / signal, duration, resources."""
    t, r = view.task, view.task.result
    facts = [f"id={t.id}", f"status={t.state}"]
    if t.stdin != "null":
        facts.append(f"stdin={t.stdin}")
    if r and r.exit_code is not None:
        facts.append(f"exit_code={r.exit_code}")
    if r and r.signal:
        facts.append(f"signal={r.signal}")
    if view.duration is not None:
        facts.append(f"duration={view.duration:.2f}s")
    if r and r.rusage:
        facts.append(f"cpu={r.rusage.cpu_seconds:.2f}s")
        if r.rusage.max_rss_exact:  # else the figure is the daemon's own peak, not the task's: left out
            facts.append(f"max_rss={human_bytes(r.rusage.max_rss_bytes)}")
    if view.queue_position:
        facts.append(f"queue_position={view.queue_position}")
    if view.leftovers:
        facts.append(f"leftover_processes={len(view.leftovers)}")
    return " ".join(facts)


def status_text(view: TaskView, extra_facts: str = "") -> str:
    t, r = view.task, view.task.result
    lines = [facts_line(view) + extra_facts, f"cmd: {one_line(t.cmd, 400)}", f"cwd: {t.cwd}"]
    if t.timeout_secs:
        lines.append(f"timeout: {t.timeout_secs:g}s")
    if r and r.note:
        lines.append(f"note: {r.note}")
    if view.leftovers:
        lines.append(still_alive_line(t.id, view.leftovers))
    if view.unsaved is not None:
        lines.append(unsaved_line(view.unsaved))
    if t.state == T.PENDING:
        lines.append("waiting for a free slot (the daemon's max_running); kill(id) cancels it")
    return "\n".join(lines) + "\n" + (view.output.text if view.output else "")


def last_lines(view: TaskView, count: int = STARTED_LINES) -> str:
    """The last lines of each stream that has output, for `task started` (cut to STARTED_BYTES a stream)."""
    blocks = []
    for label, tail in (("stdout", view.stdout), ("stderr", view.stderr)):
        if tail is None or not tail.text:
            continue
        text = "\n".join(tail.text.rstrip("\n").split("\n")[-count:])[-STARTED_BYTES:]
        blocks.append(f"--- {label}, last lines so far ({tail.size} bytes in all) ---\n{text}\n")
    return "".join(blocks)


def matched_line(outcome: Outcome) -> str:
    """What `wait_for` found (or that it found nothing)."""
    if outcome.wait_for is None:
        return ""
    cut = (f"(truncated while watched: {', '.join(outcome.truncated)}; watched again from its start)\n"
           if outcome.truncated else "")
    if outcome.matched is not None:
        m = outcome.matched
        return f"wait_for matched ({outcome.matched_id}, {m.stream} line {m.number}): {m.text}\n" + cut
    return f"wait_for {outcome.wait_for!r}: no new line matched\n" + cut


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
    if outcome.wait_for is not None:
        data["wait_for"] = {"pattern": outcome.wait_for, "matched": vars(outcome.matched) if outcome.matched else None,
                            "truncated": outcome.truncated}
    if started_form and not view.task.terminal:
        data["started"] = True
        lines = [f"task started: id={view.task.id}",
                 f"status={view.task.state} waited={outcome.waited:.2f}s{facts}"]
        if outcome.window.capped:
            lines.append(f"(wait_seconds={outcome.window.asked:g} was capped at {outcome.window.seconds:g})")
        if outcome.wait_skipped:
            lines.append("(no inline wait: too many calls are waiting already)")
        text = "\n".join(lines) + "\n" + matched_line(outcome) + last_lines(view)
        return ToolResult(text + f"output files: {view.stdout.path if view.stdout else ''} "
                          f"{view.stderr.path if view.stderr else ''}\n" + input_step(view.task) +
                          next_step(view.task.id, outcome.notices), data)
    if started_form:
        data["started"] = False
    return ToolResult(status_text(view, facts) + matched_line(outcome), data)


def input_step(task: Task) -> str:
    """How to type into a task that takes input (send.py)."""
    if task.stdin == "null":
        return ""
    keys = ', keys: ["ctrl-c"] presses keys' if task.stdin == "tty" else ", eof: true ends its input"
    return (f"It reads its input ({task.stdin}): send(id=\"{task.id}\", text=\"...\") types a line and answers with "
            f"what it printed{keys}.\n")


def next_step(task_id: str, notices: Notices) -> str:
    """What a `task started` answer tells the agent to do next: the promise of a todo only when one can come."""
    return notices.say(
        f"It keeps running; its completion will surface as a todo. status(id=\"{task_id}\") checks it.\n",
        f"It keeps running. No completion notice will come ({NO_SOCKET}): check it with "
        f"status(id=\"{task_id}\", wait_seconds=30).\n")


def many_result(outcome: ManyOutcome) -> ToolResult:
    """`status(ids=[...])`: one line per task, then how the wait went."""
    facts, wait = wait_facts(outcome.first)
    lines = [f"{facts_line(v)} cmd: {one_line(v.task.cmd, 60)}" for v in outcome.views]
    ended = [v.task.id for v in outcome.views if v.task.terminal]
    tail = (f"ended: {' '.join(ended)}; status(id=...) shows a task's output" if ended
            else f"none ended in {outcome.first.waited:.2f}s")
    text = "\n".join(lines) + f"\n{tail}{facts}\n" + matched_line(outcome.first)
    data = {"tasks": [v.to_dict() for v in outcome.views], "ended": ended, "wait": wait}
    if outcome.first.wait_for is not None:
        data["wait_for"] = {"pattern": outcome.first.wait_for, "id": outcome.first.matched_id,
                            "matched": vars(outcome.first.matched) if outcome.first.matched else None,
                            "truncated": outcome.first.truncated}
    return ToolResult(text, data)


def kill_result(outcome: KillOutcome) -> ToolResult:
    view = outcome.view
    text = f"id={view.task.id} action={outcome.action} status={view.task.state}\n{outcome.message}\n"
    return ToolResult(text, view.to_dict() | {"action": outcome.action, "message": outcome.message})


def list_result(views: list[TaskView], total: int, state: str | None) -> ToolResult:
    now = time.time()
    rows: list[dict[str, Any]] = []
    for v in views:
        result = v.task.result
        rows.append({"id": v.task.id, "status": v.task.state, "age_seconds": round(now - v.task.submitted_at, 1),
                     "exit_code": result.exit_code if result else None, "signal": result.signal if result else None,
                     "duration": None if v.duration is None else round(v.duration, 3), "cmd": one_line(v.task.cmd, 200),
                     "stdin": v.task.stdin})
    head = f"tasks={total} shown={len(rows)}" + (f" state={state}" if state else "")
    if not rows:
        return ToolResult(head + "\n(no tasks)\n", {"total": total, "tasks": rows})
    width = max(len("ID"), *(len(r["id"]) for r in rows))
    inputs = any(r["stdin"] != "null" for r in rows)  # a STDIN column only when some task takes input
    lines = [head, f"{'ID':<{width}}  {'STATUS':<11}  {'AGE':>5}  {'EXIT':>4}  " + ("STDIN " if inputs else "") + "COMMAND"]
    for r in rows:
        code = "-" if r["exit_code"] is None else str(r["exit_code"])
        stdin = (f"{'-' if r['stdin'] == 'null' else r['stdin']:<5} " if inputs else "")
        lines.append(f"{r['id']:<{width}}  {r['status']:<11}  {human_age(r['age_seconds']):>5}  {code:>4}  "
                     f"{stdin}{one_line(r['cmd'], 60)}")
    return ToolResult("\n".join(lines) + "\n", {"total": total, "tasks": rows})
