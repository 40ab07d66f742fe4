"""Declaring a tool once (name, description for the model, input schema, handler) and calling it safely.

Arguments are checked against the declared schema, by the quick check (common/protocol/quick_check.py) or
else by `jsonschema` (common/protocol/argument_schema.py); each error names the field and the rule. A handler
signals an expected failure by raising `ToolError` or a `Refusal` (an `isError` result the model reads); any
other exception becomes a short `isError` result, logged with its traceback, and the server keeps
serving.
"""

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from common.event_log import Scalar, event
from common.protocol.argument_errors import check_encodable
from common.protocol.call_progress import NO_PROGRESS, Cancellation, ProgressReporter
from common.protocol.quick_check import compile_quick_check

if TYPE_CHECKING:
    from common.metrics.tool_calls import ToolCallMetrics
    from common.protocol.mcp_tasks import TaskHandles

log = logging.getLogger(__name__)


class ToolError(Exception):
    """An expected failure of a tool call (bad value, unknown id, refused action): shown to the model as is."""


class Refusal(ToolError, ValueError):
    """What both daemons refuse a call with (a bad value, an unknown id, a refused action); the message names the
    field and the rule. The registry answers it as the call's `isError` result, so no handler wraps it."""


class UnknownTool(LookupError):
    """No tool of that name is registered."""


def never_gone() -> bool:
    """The `client_gone` of a caller that cannot hang up (in-process calls, tests)."""
    return False


def closed_object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A tool's input schema: an object of these properties only (any other field is refused by name)."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return schema


@dataclass(frozen=True)
class CallContext:
    """What a handler may want to know about the call beyond its arguments.

    `client_gone()` tells, without blocking, whether the client has hung up or cancelled the call (an inline
    wait whose caller is gone must still leave the result where the agent will find it). `cancel` is fired
    by that hang-up or cancel, so a wait that registers with it ends at once; `progress` reports to a client
    that asked for progress (common/protocol/call_progress.py). `operator` marks a call from an operator's CLI rather
    than the agent: it must not count as the agent having seen anything. `client_tasks`: the client declared the
    tasks extension (and the daemon serves it), so a call still at work may answer with a task handle."""

    structured: bool = False
    protocol_version: str | None = None
    session_id: str | None = None
    client_gone: Callable[[], bool] = never_gone
    operator: bool = False
    cancel: Cancellation = field(default_factory=Cancellation)
    progress: ProgressReporter = NO_PROGRESS
    client_tasks: bool = False


@dataclass
class ToolResult:
    """One result, formatted twice: `text` for the model (the default) and `data` for programmatic callers.
    `data` is only read (sent as structuredContent), so any answer's TypedDict goes in as it is, uncopied; at run
    time it is a dict (common/protocol/methods.py sends a dict's result on its fast path)."""

    text: str
    data: Mapping[str, Any] = field(default_factory=dict)
    is_error: bool = False
    # A CreateTaskResult (common/protocol/mcp_tasks.py) answered instead, to a call whose CallContext.client_tasks
    # is set; `text` stays the answer for any other caller.
    task: Mapping[str, Any] | None = None


# A handler's arguments: the TypedDict of its tool's input schema (hivebash/tools/__init__.py `RunArgs`, ...), so mypy
# checks every key a handler reads; at run time a plain dict, as the registry validated it.
Args = TypeVar("Args", bound=Mapping[str, Any])
Handler = Callable[[Args, CallContext], ToolResult]


@dataclass(frozen=True)
class Tool(Generic[Args]):
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler[Args]
    title: str | None = None
    annotations: Mapping[str, Any] | None = None
    # An argument name a caller may mean, mapped to what to say (`{"prompt": "the first turn's prompt is
    # trigger"}`): shown when that unknown name is refused, where spelling alone would point elsewhere.
    argument_hints: Mapping[str, str] | None = None
    # Arguments the handler limits in bytes of UTF-8 (the schema's maxLength counts characters): named with that
    # limit when a call's body is over the request limit (common/protocol/oversized_call.py).
    byte_limits: Mapping[str, int] | None = None
    # How this tool takes a long part through a file instead, ending "write the long part to a file and ...":
    # said when a call's body is over the request limit (common/protocol/oversized_call.py);
    # None: "pass its path instead".
    file_route: str | None = None
    # The description for a client that declared the tasks extension (None: the same as `description`).
    task_description: str | None = None

    def listing(self, client_tasks: bool = False) -> dict[str, Any]:
        """The tool as `tools/list` shows it (`client_tasks`: to a client of the tasks extension). No outputSchema:
        the Python SDK would then *require* structuredContent on every result, and Claude Code would show the
        model only that (docs/design.md, "MCP clients")."""
        description = self.task_description if client_tasks and self.task_description else self.description
        entry: dict[str, Any] = {"name": self.name, "description": description, "inputSchema": self.input_schema}
        if self.title:
            entry["title"] = self.title
        if self.annotations:
            entry["annotations"] = dict(self.annotations)
        return entry


# The ids a call's event names, from its arguments or else its result's data: bash tasks by `id`, sessions by `name`.
ID_FIELDS = (("id", "task"), ("name", "name"))


def _log_call(tool: Tool[Any], arguments: Any, result: ToolResult | None, outcome: str, seconds: float) -> None:
    """One `tool_call` event: the tool, its outcome, the seconds and the ids involved (never an argument's
    value beyond those: a command or a prompt may hold secrets). A call that went well is a debug line: what
    it changed has events of its own (a task's end), and a line on every call's path would cost each `run`
    a few percent of its daemon CPU; a refusal or a failure is notable."""
    level = logging.DEBUG if outcome == "ok" else logging.INFO
    if not log.isEnabledFor(level):
        return
    fields: dict[str, Scalar] = {"tool": tool.name, "outcome": outcome, "seconds": seconds}
    data = result.data if result is not None and isinstance(result.data, dict) else {}
    for key, shown in ID_FIELDS:
        value = arguments.get(key) if isinstance(arguments, dict) else None
        value = value if isinstance(value, str) else data.get(key)
        if isinstance(value, str) and len(value) <= 64 and value.isprintable():
            fields[shown] = value
    event(log, "tool_call", level, **fields)


def refuse_unknown_arguments(verb: str, args: Mapping[str, Any], fields: Sequence[str],
                             refusal: type[Refusal]) -> None:
    """Raise `refusal` naming the first argument of `args` that `verb` does not take, and those it takes: an
    engine's own check, for callers that bypass the tool schemas."""
    for key in args:
        if key not in fields:
            raise refusal(f"{key}: not an argument of {verb} (it takes {', '.join(fields)})")


class ToolRegistry:
    """The tools one server offers, by name, in declaration order, and the server-wide guidance a model reads
    once (`instructions`: MCP's `initialize` and `server/discover` carry it; `task_instructions` to a client of
    the tasks extension). `task_handles`: the daemon's side of that extension (common/protocol/mcp_tasks.py)."""

    def __init__(self, tools: Sequence[Tool[Any]] = (), instructions: str | None = None,
                 task_handles: "TaskHandles | None" = None, task_instructions: str | None = None):
        self.instructions = instructions
        self.task_instructions = task_instructions
        self.task_handles = task_handles
        # Tool[Any]: each tool's handler takes its own TypedDict; `call` is where a validated dict becomes it.
        self._tools: dict[str, Tool[Any]] = {}
        # One validator a tool, kept: building one (a referencing registry and resolver) per call was a tenth of
        # a tools/call's Python time (docs/performance.md, "Measurements behind the code"). Most calls are
        # answered by the quick check alone (common/protocol/quick_check.py), so a validator is built, and
        # jsonschema imported (~45 ms of a start), at the first call the quick check does not pass.
        self._validators: dict[str, Any] = {}
        self._quick: dict[str, Callable[[dict[str, Any]], bool] | None] = {}
        self.metrics: ToolCallMetrics | None = None  # set by the daemon that serves /metrics
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool[Any]) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} declared twice")
        self._tools[tool.name] = tool
        self._quick[tool.name] = compile_quick_check(tool.input_schema)

    def _validator(self, tool: Tool[Any]) -> Any:
        """The tool's jsonschema validator (its schema checked first: jsonschema.SchemaError if it is not one)."""
        validator = self._validators.get(tool.name)
        if validator is None:
            from common.protocol.argument_schema import argument_validator  # jsonschema, when first needed
            validator = self._validators[tool.name] = argument_validator(tool.input_schema)
        return validator

    def listing(self, client_tasks: bool = False) -> list[dict[str, Any]]:
        return [t.listing(client_tasks) for t in self._tools.values()]

    def instructions_for(self, client_tasks: bool) -> str | None:
        return self.task_instructions if client_tasks and self.task_instructions else self.instructions

    def tools(self) -> list[Tool[Any]]:
        """The declared tools, in declaration order."""
        return list(self._tools.values())

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def get(self, name: str) -> Tool[Any]:
        """The tool of that name; UnknownTool if none."""
        tool = self._tools.get(name)
        if tool is None:
            raise UnknownTool(name)
        return tool

    def call(self, name: str, arguments: Any, ctx: CallContext | None = None) -> ToolResult:
        """Validate and run one call. Raises UnknownTool / ToolArgumentsError (protocol errors);
        every failure inside the handler comes back as an `isError` ToolResult. With `metrics` set, each call
        of a known tool is counted by its outcome and timed (common/metrics/tool_calls.py)."""
        tool = self._tools.get(name)
        if tool is None:
            raise UnknownTool(name)
        started = time.monotonic()
        call = None if self.metrics is None else self.metrics.began(name)
        result, outcome = None, "invalid_arguments"
        try:
            result, outcome = self._call(tool, arguments, ctx)
        finally:
            if call is not None and self.metrics is not None:
                self.metrics.ended(call, outcome)
            _log_call(tool, arguments, result, outcome, time.monotonic() - started)
        return result

    def _call(self, tool: Tool[Any], arguments: Any, ctx: CallContext | None) -> tuple[ToolResult, str]:
        """The result and its outcome for the metrics ("ok", "error", "internal_error")."""
        name = tool.name
        quick = self._quick[name]
        if quick is not None and isinstance(arguments, dict) and quick(arguments):
            args = arguments
            check_encodable(args, "")  # the quick check looks at types and lengths only
        else:
            from common.protocol.argument_schema import validate_arguments
            args = validate_arguments(self._validator(tool), arguments, tool.argument_hints)
        # The one seam where the call's dict becomes trusted: it satisfies the tool's schema (quick check or
        # jsonschema, just above), and so the handler's TypedDict of that schema (tests/test_tool_args.py holds
        # the two equal). Tool[Any] passes it through untouched: no cast, no copy, nothing checked again.
        try:
            result = tool.handler(args, ctx or CallContext())
        except ToolError as exc:
            return ToolResult(text=str(exc), data={"error": str(exc)}, is_error=True), "error"
        except Exception as exc:  # the server keeps serving; the operator gets the traceback in the log
            log.exception("tool %s failed unexpectedly", name)
            message = f"internal error in tool {name!r}: {type(exc).__name__}: {exc}"[:500]
            return ToolResult(text=message, data={"error": message}, is_error=True), "internal_error"
        return result, "error" if result.is_error else "ok"
