"""The MCP surface of the bash daemon: `run`, `status`, `kill`, `list`, their schemas and handlers (the
answers' text and data: hivebash/views.py)."""

from __future__ import annotations

from typing import Any

from common.names import NAME_RULE
from common.tools import CallContext, Tool, ToolError, ToolRegistry, ToolResult
from common.waiting import DEFAULT_WAIT_SECONDS

from . import task as T
from .arguments import MAX_CMD_BYTES, EngineError
from .engine import Engine
from .views import kill_result, list_result, outcome_result

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
