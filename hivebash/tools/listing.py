"""The `list` tool: its arguments, schema and handler."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from common.protocol.tools import CallContext, Tool, ToolResult, closed_object
from hivebash.answers.list_table import list_result
from hivebash.tasks import task as T
from hivebash.tools.declaring import bound

if TYPE_CHECKING:
    from hivebash.engine import Engine


LIST_LIMIT_MAX = 1000


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


def _answer_list(engine: Engine, args: ListArgs, ctx: CallContext) -> ToolResult:
    views, total = engine.list(**({"limit": 50} | dict(args)))
    return list_result(views, total, args.get("state"), args.get("offset", 0))


def list_tool(engine: Engine | None) -> Tool[ListArgs]:
    return Tool(handler=bound(engine, _answer_list), title="List background tasks", **LIST,
                annotations={"readOnlyHint": True})
