"""The `kill` tool: its arguments, schema and handler."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Required, TypedDict

from common.notices import Notices
from common.protocol.tools import CallContext, Tool, ToolResult, closed_object
from hivebash.answers.texts import kill_result
from hivebash.tools.declaring import ID_SCHEMA, WAIT_SCHEMA, bound

if TYPE_CHECKING:
    from hivebash.engine import Engine


class KillArgs(TypedDict, total=False):
    """`kill`'s arguments, as kill_declaration's schema declares them."""

    id: Required[str]
    force: bool
    wait_seconds: float


def kill_declaration(notices: Notices) -> dict[str, Any]:
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


def _answer_kill(engine: Engine, args: KillArgs, ctx: CallContext) -> ToolResult:
    return kill_result(engine.kill(call=ctx, **args))


def kill_tool(engine: Engine | None, notices: Notices) -> Tool[KillArgs]:
    return Tool(handler=bound(engine, _answer_kill), title="Stop a background task", **kill_declaration(notices),
                annotations={"destructiveHint": True})
