"""The MCP surface of the bash daemon: `run`, `status`, `kill`, `list`, their schemas, and result formatting.

Every result is formatted twice from one view (DESIGN.md, "Results the model reads"): `text` for the model,
a first line of stable key=value facts and then the output tails verbatim; `data`, the exact structured form
for programmatic callers (the CLI's --json).
"""

from __future__ import annotations

import time
from typing import Any

from common.names import NAME_RULE
from common.tools import CallContext, Tool, ToolError, ToolRegistry, ToolResult
from common.waiting import DEFAULT_WAIT_SECONDS

from . import task as T
from .engine import MAX_CMD_BYTES, Engine, EngineError, KillOutcome, Outcome, TaskView, shorten
from .store import Tail

ID_SCHEMA = {
    "type": "string",
    "pattern": f"^{NAME_RULE}$",
    "description": "Task id, as returned by run (or the name you gave it).",
}
WAIT_SCHEMA = {
    "type": "number",
    "minimum": 0,
    "description": "Seconds to wait inline for the task to finish before answering (capped at 30; 0 = answer at once).",
}
LIST_LIMIT_MAX = 1000

RUN = dict(
    name="run",
    description=(
        "Run a shell command in the background (`bash -c CMD`, in its own process group, stdin from /dev/null). "
        "Stdout and stderr go to files under the daemon's state directory (harness/bash-tasks/<id>.out/.err). "
        f"Waits inline up to `wait_seconds` (default {DEFAULT_WAIT_SECONDS:g}, capped at 30): if the task finishes "
        "in that window you get the full status at once and no todo is created; otherwise the answer is "
        "`task started: id=<id>` and the task keeps running: when it completes, times out or fails, it surfaces as "
        "a todo (get_loose_ends) with the exit code and Read(<path>) pointers to its output. "
        "`name` (optional) is a memorable id ([a-z0-9-], 1-63 chars) usable in status/kill; it can be reused once "
        "its previous task has finished and is refused while that task is pending or running. `timeout_secs` "
        "kills the task after that many seconds (SIGTERM to its group, SIGKILL after a grace) and marks it "
        "`timed_out`; omit it to let the command run until it exits. `cwd` sets the working directory (an "
        "existing directory). When too many tasks already run, a new one waits as `pending` in submission order."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "cmd": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_CMD_BYTES,
                "description": "The shell command line, run as `bash -c CMD` (pipes, &&, loops and redirections work).",
            },
            "timeout_secs": {
                "type": "integer",
                "minimum": 1,
                "maximum": 1_000_000_000,
                "description": "Kill the task after this many seconds and mark it timed_out. Omit for no timeout.",
            },
            "wait_seconds": WAIT_SCHEMA | {
                "description": f"Seconds to wait inline for the result (default {DEFAULT_WAIT_SECONDS:g}, capped at 30; "
                               "0 = return `task started` at once)."
            },
            "name": {
                "type": "string",
                "pattern": f"^{NAME_RULE}$",
                "description": "Optional task id of your choice: lowercase letters, digits and '-', 1 to 63 characters.",
            },
            "cwd": {
                "type": "string",
                "minLength": 1,
                "maxLength": 4096,
                "description": "Working directory (an existing directory; relative paths are taken from the daemon's).",
            },
        },
        "required": ["cmd"],
        "additionalProperties": False,
    },
)

STATUS = dict(
    name="status",
    description=(
        "Status of a task started with `run`: status (pending, running, done, timed_out, interrupted, killed), "
        "exit_code when done (a death by signal is named), duration (live while running), CPU seconds and peak "
        "memory, any of its processes still alive, and the last 4 KiB of stdout and of stderr (the full output is "
        "in the files named). `wait_seconds` (optional, capped at 30) waits inline and answers the moment the "
        "task ends. A status that shows a finished task clears that task's completion todo. `interrupted` means "
        "the daemon restarted or stopped while the task ran: its process was stopped."
    ),
    input_schema={
        "type": "object",
        "properties": {"id": ID_SCHEMA, "wait_seconds": WAIT_SCHEMA},
        "required": ["id"],
        "additionalProperties": False,
    },
)

KILL = dict(
    name="kill",
    description=(
        "Stop a running or pending task. Fire-and-forget: sends the signal and returns without waiting; the end "
        "surfaces as a todo (or check with status). force=false (default): SIGINT to the task's whole process "
        "group (graceful), and once the shell has exited, whatever it left behind gets SIGTERM then SIGKILL. "
        "force=true: SIGKILL to everything of the task, including processes that left its group. If a SIGINT'd "
        "task does not exit, call kill again with force=true. A pending task is cancelled before it starts. The "
        "task ends as `killed`. On a finished task, kill stops its leftover background processes, if any."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "id": ID_SCHEMA,
            "force": {"type": "boolean", "description": "SIGKILL instead of SIGINT (default false)."},
        },
        "required": ["id"],
        "additionalProperties": False,
    },
)

LIST = dict(
    name="list",
    description=(
        "List the known tasks, newest first: id, status, age, exit code and the start of the command. Use it to "
        "find your tasks again (after a context compaction, for instance). Optional `state` filter and `limit` "
        "(default 50)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "state": {"type": "string", "enum": list(T.STATE_ORDER), "description": "Only tasks in this state."},
            "limit": {"type": "integer", "minimum": 1, "maximum": LIST_LIMIT_MAX, "description": "At most this many (default 50)."},
        },
        "additionalProperties": False,
    },
)


# ----- formatting ----------------------------------------------------------------------------------------------


def human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n}B"


def human_age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


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
    lines = [facts_line(view) + extra_facts, f"cmd: {shorten(t.cmd, 400)}", f"cwd: {t.cwd}"]
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
                     "duration": None if v.duration is None else round(v.duration, 3), "cmd": shorten(v.task.cmd, 200)})
    head = f"tasks={total} shown={len(rows)}" + (f" state={state}" if state else "")
    if not rows:
        return ToolResult(head + "\n(no tasks)\n", {"total": total, "tasks": rows})
    width = max(len("ID"), *(len(r["id"]) for r in rows))
    lines = [head, f"{'ID':<{width}}  {'STATUS':<11}  {'AGE':>5}  {'EXIT':>4}  COMMAND"]
    for r in rows:
        code = "-" if r["exit_code"] is None else str(r["exit_code"])
        lines.append(f"{r['id']:<{width}}  {r['status']:<11}  {human_age(r['age_seconds']):>5}  {code:>4}  "
                     f"{shorten(r['cmd'], 60)}")
    return ToolResult("\n".join(lines) + "\n", {"total": total, "tasks": rows})


# ----- handlers -----------------------------------------------------------------------------------------------


def build_registry(engine: Engine) -> ToolRegistry:
    """The four tools bound to one engine."""

    def guarded(fn):
        def handler(args: dict[str, Any], ctx: CallContext) -> ToolResult:
            try:
                return fn(args, ctx)
            except EngineError as exc:
                raise ToolError(str(exc)) from None
        return handler

    def run(args, ctx):
        outcome = engine.run(args["cmd"], timeout_secs=args.get("timeout_secs"), wait_seconds=args.get("wait_seconds"),
                             name=args.get("name"), cwd=args.get("cwd"), client_gone=ctx.client_gone)
        return outcome_result(outcome, started_form=True)

    def status(args, ctx):
        outcome = engine.status(args["id"], wait_seconds=args.get("wait_seconds"), client_gone=ctx.client_gone)
        return outcome_result(outcome, started_form=False)

    def kill(args, ctx):
        return kill_result(engine.kill(args["id"], force=bool(args.get("force", False))))

    def list_(args, ctx):
        views, total = engine.list(state=args.get("state"), limit=args.get("limit", 50))
        return list_result(views, total, args.get("state"))

    return ToolRegistry([
        Tool(handler=guarded(run), title="Run a shell command in the background", **RUN),
        Tool(handler=guarded(status), title="Status and output of a background task", **STATUS,
             annotations={"readOnlyHint": True}),
        Tool(handler=guarded(kill), title="Stop a background task", **KILL, annotations={"destructiveHint": True}),
        Tool(handler=guarded(list_), title="List background tasks", **LIST, annotations={"readOnlyHint": True}),
    ])
