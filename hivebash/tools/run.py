"""The `run` tool: its arguments, schema and handler."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Required, TypedDict

from common.names import NAME_RULE
from common.notices import NO_SOCKET, Notices
from common.protocol.tools import CallContext, Tool, ToolResult, closed_object
from common.waiting import DEFAULT_WAIT_SECONDS
from hivebash.answers.texts import outcome_result
from hivebash.stdin.task_input import KINDS
from hivebash.tools.declaring import WAIT_FOR_SCHEMA, WAIT_SCHEMA, bound
from hivebash.verbs.requests import MAX_CMD_BYTES

if TYPE_CHECKING:
    from hivebash.engine import Engine
    from hivebash.tools.client_tasks import BashTaskHandles


class RunArgs(TypedDict, total=False):
    """`run`'s arguments, as run_declaration's schema declares them."""

    cmd: Required[str]
    timeout_secs: int
    wait_seconds: float
    wait_for: str
    stdin: str  # one of task_input.KINDS
    name: str
    cwd: str


def _ending(notices: Notices, client_tasks: bool) -> str:
    """How the end of a task still running after the wait reaches the model."""
    if client_tasks:
        return ("it moves to your client's background tasks: its result arrives as a task notification when it "
                "ends (status, send and kill still take its id)")
    return notices.say("its completion then arrives as a todo",
                       f"no completion notice comes ({NO_SOCKET}): check with status")


def run_declaration(default_cwd: str, notices: Notices, client_tasks: bool = False) -> dict[str, Any]:
    """`run`'s declaration; it names the daemon's working directory and how a completion reaches the model (a todo,
    nothing, or, `client_tasks`, the client's own background tasks: the tasks extension)."""
    ending = _ending(notices, client_tasks)
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
            "`\"tty\"` (a terminal: password prompts, REPLs, `git add -p`; the wait ends when it waits for input)."
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


RUN_FILE_ROUTE = "run it by its path (e.g. `bash /path/to/script.sh`; data: `cmd < /path/to/data`)"


def run_tool(engine: Engine | None, notices: Notices, default_cwd: str,
             handles: BashTaskHandles | None = None) -> Tool[RunArgs]:
    """`handles`: a client that declared the tasks extension gets a task still running after the wait as a task
    handle (hivebash/tools/client_tasks.py)."""
    def answer(engine: Engine, args: RunArgs, ctx: CallContext) -> ToolResult:
        outcome = engine.run(call=ctx, **args)
        if ctx.client_tasks and handles is not None and not outcome.view.task.terminal:
            handed = handles.hand_out(outcome)
            if handed is not None:
                return handed
        return outcome_result(outcome, started_form=True)

    return Tool(handler=bound(engine, answer), title="Run a shell command in the background",
                **run_declaration(default_cwd, notices), byte_limits={"cmd": MAX_CMD_BYTES}, file_route=RUN_FILE_ROUTE,
                task_description=run_declaration(default_cwd, notices, client_tasks=True)["description"])
