"""What every tool's declaration shares: the schemas of an id, a wait and a wait_for, and binding a handler to
the engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from common.names import NAME_RULE
from common.protocol.tools import Args, CallContext, Handler, ToolError, ToolResult

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



def bound(engine: Engine | None, fn: Callable[[Engine, Args, CallContext], ToolResult]) -> Handler[Args]:
    """`fn` with the engine; its refusals (common.protocol.tools.Refusal) are answered by the registry."""
    def handler(args: Args, ctx: CallContext) -> ToolResult:
        if engine is None:
            raise ToolError("this registry only declares the tools (built without an engine)")
        return fn(engine, args, ctx)
    return handler
