"""The MCP surface of the bash daemon: `run`, `status`, `send`, `kill`, `list`, their schemas, their arguments'
TypedDicts and handlers (the answers' text and data: hivebash/answers/views.py).

Each tool's arguments are declared twice, side by side: the JSON schema the registry validates a call against,
and the TypedDict its handler reads, so mypy checks every key read (tests/test_tool_args.py holds the two to
the same keys and the same required ones)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Required, TypedDict

from common.names import NAME_RULE
from common.notices import NO_SOCKET, Notices
from common.protocol.tools import Args, CallContext, Handler, Tool, ToolError, ToolRegistry, ToolResult, closed_object
from common.waiting import DEFAULT_WAIT_SECONDS
from hivebash import output_views as ov
from hivebash.answers.list_table import list_result
from hivebash.answers.texts import kill_result, many_result, outcome_result
from hivebash.answers.views import ManyOutcome
from hivebash.stdin.task_input import KINDS
from hivebash.tasks import task as T
from hivebash.tools.send import SendArgs, send_result, send_tool
from hivebash.verbs.arguments import MAX_CMD_BYTES, MAX_IDS

if TYPE_CHECKING:
    from hivebash.engine import Engine

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
WAIT_FOR_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 1000,
    "description": "A Python regex: the inline wait also ends when a new line of output matches it.",
}
LIST_LIMIT_MAX = 1000


class RunArgs(TypedDict, total=False):
    """`run`'s arguments, as run_tool's schema declares them."""

    cmd: Required[str]
    timeout_secs: int
    wait_seconds: float
    wait_for: str
    stdin: str  # one of task_input.KINDS
    name: str
    cwd: str


def run_tool(default_cwd: str, notices: Notices) -> dict[str, Any]:
    """`run`'s declaration; it names the daemon's working directory and whether completions become todos."""
    ending = notices.say("its completion then arrives as a todo",
                         f"no completion notice comes ({NO_SOCKET}): check with status")
    return dict(
        name="run",
        description=(
            "Run a shell command; it already runs in the background, so do not end `cmd` with `&`. Each run is a fresh "
            "`bash -c CMD` (a `cd` or `export` does not carry over), in its own process group, in `cwd` or else "
            f"{default_cwd}. Waits inline up to `wait_seconds` (default {DEFAULT_WAIT_SECONDS:g}, max 30): a task that "
            "ends in time answers with its full status; otherwise `task started: id=<id>` with its output so far, and "
            f"{ending}. `wait_for` (a regex) also ends the wait at an output line you were not shown yet, e.g. "
            "`wait_for: \"listening on\"` for a server. `name`: your id ([a-z0-9-]); reusing a finished task's name "
            "replaces that task and its output files. `timeout_secs` kills it after that long. Past the daemon's max "
            "running tasks it waits as `pending`. stdin is /dev/null unless `stdin: \"pipe\"` (feed it with send) or "
            "`\"tty\"` (a terminal: password prompts, REPLs, `git add -p`; pair it with `wait_for` on the prompt)."
        ),
        input_schema=closed_object(
            {
                "cmd": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_CMD_BYTES,
                    "description": "The shell command line, run as `bash -c CMD` (pipes, &&, loops and redirections "
                                   "work); at most 65,536 bytes of UTF-8: write long scripts to a file and run that.",
                },
                "timeout_secs": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 1_000_000_000,
                    "description": "Kill the task after this many seconds and mark it timed_out. Omit for no timeout.",
                },
                "wait_seconds": WAIT_SCHEMA | {
                    "description": f"Seconds to wait inline for the result (default {DEFAULT_WAIT_SECONDS:g}, capped "
                                   "at 30; 0 = return `task started` at once)."
                },
                "wait_for": WAIT_FOR_SCHEMA,
                "stdin": {
                    "type": "string",
                    "enum": list(KINDS),
                    "description": "null (default): no input. pipe: send writes to it. tty: a 120x40 terminal "
                                   "(its output, stderr included, goes to stdout).",
                },
                "name": {
                    "type": "string",
                    "pattern": f"^{NAME_RULE}$",
                    "description": "Optional task id of your choice: lowercase letters, digits and '-', 1 to 63 "
                                   "characters. Reusing a finished task's name replaces it and its files.",
                },
                "cwd": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 4096,
                    "description": "Working directory (an existing directory; default and base of relative paths: "
                                   f"{default_cwd}).",
                },
            },
            required=("cmd",),
        ),
    )


class StatusArgs(TypedDict, total=False):
    """`status`'s arguments, as status_tool's schema declares them."""

    id: str
    ids: list[str]
    all: bool
    wait_seconds: float
    wait_for: str
    grep: str
    context: int
    from_line: int
    max_lines: int
    tail_lines: int
    stream: str  # one of output_views.STREAMS
    new_only: bool


def status_tool(notices: Notices) -> dict[str, Any]:
    clears = notices.say(" Showing you a finished task clears its todo.", "")
    return dict(
        name="status",
        description=(
            "A task's state (pending, running, done, timed_out, interrupted, killed), exit_code, duration, CPU, "
            "processes it left alive, and the end of stdout and stderr (4 KiB each; `tail_lines: 20` for the last 20 "
            "lines, e.g. when polling a chatty server). Views of the whole output instead, each under 8 KiB: `grep: "
            "\"error|FAIL\"` (numbered matching lines; `context: 2` adds lines around), `from_line: 5000, max_lines: "
            "40` (a window; `max_lines` alone or a negative from_line: the last lines), `stream: \"stderr\"`, "
            "`new_only: true` (only output you were not shown yet). `wait_seconds` (max 30) waits for the end; "
            "`ids: [\"a\", \"b\"]` waits for the next of several to end (`all: true`: for every one); `wait_for: "
            f"\"regex\"` also ends the wait at a line you were not shown yet.{clears} `interrupted`: the daemon "
            "stopped while it ran."
        ),
        input_schema=closed_object(
            {
                "id": ID_SCHEMA,
                "ids": {"type": "array", "items": ID_SCHEMA, "minItems": 1, "maxItems": MAX_IDS, "uniqueItems": True,
                        "description": "Several task ids instead of id: the wait ends when the next of those still "
                                       "running ends (or, with all, when every one has)."},
                "all": {"type": "boolean", "description": "With ids: wait until every task has ended."},
                "wait_seconds": WAIT_SCHEMA,
                "wait_for": WAIT_FOR_SCHEMA,
                "grep": {"type": "string", "minLength": 1, "maxLength": 1000,
                         "description": "A Python regex: the matching lines of the whole output, numbered."},
                "context": {"type": "integer", "minimum": 0, "maximum": ov.CONTEXT_MAX,
                            "description": "With grep: lines shown before and after each match (default 0)."},
                "from_line": {"type": "integer", "minimum": -1_000_000_000_000, "maximum": 1_000_000_000_000,
                              "description": "Show lines from this one (the first line is 1; -20: the last 20)."},
                "max_lines": {"type": "integer", "minimum": 1, "maximum": ov.MAX_LINES_MAX,
                              "description": f"How many lines (default {ov.DEFAULT_MAX_LINES}); alone: the last ones."},
                "tail_lines": {"type": "integer", "minimum": 1, "maximum": ov.MAX_LINES_MAX,
                               "description": "The tails as the last N lines of each stream (fewer bytes when "
                                              "polling; more lines, within the 8 KiB bound)."},
                "stream": {"type": "string", "enum": list(ov.STREAMS),
                           "description": "Only this stream (default both)."},
                "new_only": {"type": "boolean",
                             "description": "Only the output written since the last answer that showed you its end."},
            },
        ),
    )


class KillArgs(TypedDict, total=False):
    """`kill`'s arguments, as kill_tool's schema declares them."""

    id: Required[str]
    force: bool
    wait_seconds: float


def kill_tool(notices: Notices) -> dict[str, Any]:
    ending = notices.say("a later end surfaces as a todo (or check with status)", "check a later end with status")
    return dict(
        name="kill",
        description=(
            "Stop a running or pending task: the signal, then a short wait (`wait_seconds`, default 2) for the "
            f"end, so the answer says whether it ended or what survived; {ending}. force=false (default): SIGINT "
            "to the task's whole process group (graceful), and once the shell has exited, whatever it left behind "
            "gets SIGTERM then SIGKILL. force=true: SIGKILL to everything of the task, including processes that "
            "left its group. A task that ignores SIGINT keeps running (status says since when): kill it again with "
            "force=true. A pending task is cancelled before it starts. The task ends as `killed`. On a finished "
            "task, kill stops its leftover background processes, if any."
        ),
        input_schema=closed_object(
            {
                "id": ID_SCHEMA,
                "force": {"type": "boolean", "description": "SIGKILL instead of SIGINT (default false)."},
                "wait_seconds": WAIT_SCHEMA | {"description": "Seconds to wait for the end after the signal (default "
                                                              "2, capped at 30; 0 = answer at once)."},
            },
            required=("id",),
        ),
    )


class ListArgs(TypedDict, total=False):
    """`list`'s arguments, as LIST's schema declares them."""

    state: str  # one of task.STATE_ORDER
    limit: int
    offset: int


LIST: dict[str, Any] = dict(
    name="list",
    description=(
        "List the known tasks, newest first: id, status, age, exit code and the start of the command. Use it to "
        "find your tasks again (after a context compaction, for instance). Optional `state` filter and `limit` "
        "(default 50)."
    ),
    input_schema=closed_object(
        {
            "state": {"type": "string", "enum": list(T.STATE_ORDER), "description": "Only tasks in this state."},
            "limit": {"type": "integer", "minimum": 1, "maximum": LIST_LIMIT_MAX,
                      "description": "At most this many (default 50); "
                                     "the answer stays under 8 KiB and says how many are left."},
            "offset": {"type": "integer", "minimum": 0, "maximum": 1_000_000,
                       "description": "Skip this many of the newest first (the answer names the next page's offset)."},
        },
    ),
)


# ----- handlers -----------------------------------------------------------------------------------------------


def _bound(engine: Engine | None, fn: Callable[[Engine, Args, CallContext], ToolResult]) -> Handler[Args]:
    """`fn` with the engine; its refusals (common.protocol.tools.Refusal) are answered by the registry."""
    def handler(args: Args, ctx: CallContext) -> ToolResult:
        if engine is None:
            raise ToolError("this registry only declares the tools (built without an engine)")
        return fn(engine, args, ctx)
    return handler


def _run(engine: Engine, args: RunArgs, ctx: CallContext) -> ToolResult:
    outcome = engine.run(args["cmd"], timeout_secs=args.get("timeout_secs"), wait_seconds=args.get("wait_seconds"),
                         name=args.get("name"), cwd=args.get("cwd"), client_gone=ctx.client_gone,
                         wait_for=args.get("wait_for"), stdin=args.get("stdin"), cancel=ctx.cancel,
                         progress=ctx.progress)
    return outcome_result(outcome, started_form=True)


def _send(engine: Engine, args: SendArgs, ctx: CallContext) -> ToolResult:
    return send_result(engine.send(args["id"], text=args.get("text"), keys=args.get("keys"),
                                   enter=args.get("enter"), eof=args.get("eof"),
                                   wait_seconds=args.get("wait_seconds"), wait_for=args.get("wait_for"),
                                   client_gone=ctx.client_gone, operator=ctx.operator, cancel=ctx.cancel,
                                   progress=ctx.progress))


def _status(engine: Engine, args: StatusArgs, ctx: CallContext) -> ToolResult:
    view = ov.check_view(args.get("grep"), args.get("context"), args.get("from_line"), args.get("max_lines"),
                         args.get("stream"), args.get("new_only"), args.get("tail_lines"))
    ids, every = args.get("ids"), args.get("all", False)
    if ids is not None and view != ov.ViewRequest():
        raise ToolError("ids: shows one line a task; ask for a view (grep, from_line, tail_lines, stream, "
                        "new_only) with id")
    if every and ids is None:
        raise ToolError("all: goes with ids (wait until every one of several tasks has ended)")
    outcome = engine.status(args.get("id"), wait_seconds=args.get("wait_seconds"), client_gone=ctx.client_gone,
                            ids=ids, wait_for=args.get("wait_for"), view=view, operator=ctx.operator,
                            cancel=ctx.cancel, progress=ctx.progress, every=every)
    if isinstance(outcome, ManyOutcome):
        return many_result(outcome)
    return outcome_result(outcome, started_form=False)


def _kill(engine: Engine, args: KillArgs, ctx: CallContext) -> ToolResult:
    return kill_result(engine.kill(args["id"], force=args.get("force", False),
                                   wait_seconds=args.get("wait_seconds")))


def _list(engine: Engine, args: ListArgs, ctx: CallContext) -> ToolResult:
    offset = args.get("offset", 0)
    views, total = engine.list(state=args.get("state"), limit=args.get("limit", 50), offset=offset)
    return list_result(views, total, args.get("state"), offset)


RUN_FILE_ROUTE = "run it by its path (e.g. `bash /path/to/script.sh`; data: `cmd < /path/to/data`)"


def build_registry(engine: Engine | None) -> ToolRegistry:
    """The five tools bound to one engine."""
    # engine None: the declarations only (tests/robustness reads the schemas without an engine)
    cwd, notices = ((engine.default_cwd, engine.notices) if engine is not None
                    else ("the daemon's directory", Notices(True)))
    return ToolRegistry([
        Tool(handler=_bound(engine, _run), title="Run a shell command in the background", **run_tool(cwd, notices),
             byte_limits={"cmd": MAX_CMD_BYTES}, file_route=RUN_FILE_ROUTE),
        Tool(handler=_bound(engine, _status), title="Status and output of background tasks", **status_tool(notices),
             annotations={"readOnlyHint": True}),
        Tool(handler=_bound(engine, _send), title="Type into a background task",
             **send_tool(ID_SCHEMA, WAIT_FOR_SCHEMA)),
        Tool(handler=_bound(engine, _kill), title="Stop a background task", **kill_tool(notices),
             annotations={"destructiveHint": True}),
        Tool(handler=_bound(engine, _list), title="List background tasks", **LIST, annotations={"readOnlyHint": True}),
    ], instructions=instructions(notices))


def instructions(notices: Notices) -> str:
    """What the model reads once about this server (MCP `instructions`)."""
    arrival = notices.say(
        "A task that outlives its inline wait reports its end as a todo; a `status` that shows you the end clears it.",
        f"No completion notice reaches you ({NO_SOCKET}): check running tasks with `status(id, wait_seconds=30)` "
        "or `status(ids=[...], all=true, wait_seconds=30)`.")
    return ("Every `run` already runs its command in the background, in a fresh `bash -c`: do not end `cmd` with `&` "
            "or wrap it in `nohup`; wait with `wait_seconds` (up to 30) or `wait_for` a line such as a server's "
            "ready message. Read output through `status` (its tail, `tail_lines`, `new_only`, `grep`, "
            "`from_line`/`max_lines`; each answer stays under 8 KiB), not with `Read` of an output file, which may "
            f"be huge. {arrival}")
