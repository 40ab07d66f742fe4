"""The MCP methods a daemon answers (tools/list, tools/call, ping, server/discover, and the tasks extension's
tasks/* in the 2026 era: common/protocol/mcp_tasks.py), shared by both protocol eras.

common/protocol/transport.py routes an HTTP request to one of the two eras; either era then hands the method
here. Results are shaped and checked with the `mcp` package's own per-version types.
"""

import logging
from dataclasses import dataclass
from typing import Any

from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from common.protocol.argument_errors import ToolArgumentsError
from common.protocol.mcp_tasks import (
    CLIENT_CAPABILITIES_META,
    TASKS_EXTENSION,
    TaskMethods,
    TaskRpcError,
    declares_tasks,
)
from common.protocol.oversized_call import oversized_arguments
from common.protocol.tools import CallContext, ToolRegistry, ToolResult, UnknownTool
from common.protocol.wire_types import ResultMismatch, serialize_server_result

log = logging.getLogger(__name__)

# Ask for the structured form of a tool result: params._meta["hive/structured"] = true. Off by default because
# Claude Code shows the model only structuredContent when present (docs/design.md, "MCP clients"), and the
# model reads text best.
STRUCTURED_META_KEY = "hive/structured"
# The caller is an operator, not the agent: params._meta["hive/operator"] = true (set by common.protocol.client).
# An operator's look at a task must not take the agent's notice of it, nor move what the agent has seen.
OPERATOR_META_KEY = "hive/operator"
TOOL_LIST_TTL_MS = 60_000  # the tool list changes only with a new daemon version


@dataclass
class RpcError(Exception):
    """A JSON-RPC error to answer with; `http_status` None means: look it up in the SDK's table."""

    code: int
    message: str
    data: Any = None
    http_status: int | None = None


def error_body(request_id: Any, err: RpcError) -> dict[str, Any]:
    error: dict[str, Any] = {"code": err.code, "message": err.message}
    if err.data is not None:
        error["data"] = err.data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


class McpMethods:
    """The methods over one tool registry."""

    def __init__(self, registry: ToolRegistry, max_body_bytes: int | None = None, mcp_tasks: bool = True):
        """`mcp_tasks`: serve the tasks extension (--mcp-tasks), when the registry has handles for it."""
        self.registry = registry
        self.max_body_bytes = max_body_bytes  # a tools/call over it is refused as a tool error (oversized_call)
        self.tasks = TaskMethods(registry.task_handles, mcp_tasks)

    def instructions(self, client_tasks: bool = False) -> dict[str, str]:
        """The server-wide guidance for `initialize` and `server/discover` results (none: the key is left out);
        `client_tasks`: for a client that declared the tasks extension."""
        text = self.registry.instructions_for(client_tasks)
        return {"instructions": text} if text else {}

    def client_tasks(self, params: dict[str, Any], modern: bool) -> bool:
        """Whether this request's client takes task handles: the 2026 era, the extension served and declared."""
        return modern and self.tasks.enabled and declares_tasks(params)

    def dispatch(self, method: str, params: Any, version: str, modern: bool, call: Any = None,
                 body_bytes: int = 0) -> dict[str, Any]:
        """One method's result; `call` (common/event_stream.StreamedCall) links a tools/call to its client;
        `body_bytes` is the request body's size (a tools/call over max_body_bytes is refused, not run)."""
        if params is not None and not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: params must be an object")
        params = params or {}
        if method == "tools/list":
            result: dict[str, Any] = {"tools": self.registry.listing(self.client_tasks(params, modern))}
            if modern:
                result.update(ttlMs=TOOL_LIST_TTL_MS, cacheScope="public")
            return result
        if method == "tools/call":
            return self._call_tool(params, version, call, body_bytes)
        if method == "ping" and not modern:
            return {}
        if method == "server/discover" and modern:
            capabilities: dict[str, Any] = {"tools": {"listChanged": False}}
            if self.tasks.enabled:
                capabilities["extensions"] = {TASKS_EXTENSION: {}}
            return {
                "supportedVersions": list(MODERN_PROTOCOL_VERSIONS),
                "capabilities": capabilities,
                "ttlMs": TOOL_LIST_TTL_MS,
                "cacheScope": "public",
                **self.instructions(self.client_tasks(params, modern)),
            }
        if modern and self.tasks.serves(method):
            try:
                return self.tasks.dispatch(method, params)
            except TaskRpcError as err:
                raise RpcError(err.code, err.message, err.data) from None
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}", data=method)

    def _call_tool(self, params: dict[str, Any], version: str, call: Any, body_bytes: int = 0) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: name must be a string (the tool to call)")
        meta = params.get("_meta")
        if not isinstance(meta, dict):
            meta = {}
        client_tasks = False
        if self.tasks.enabled and version in MODERN_PROTOCOL_VERSIONS:  # declares_tasks, inlined: every call's path
            caps = meta.get(CLIENT_CAPABILITIES_META)
            extensions = caps.get("extensions") if type(caps) is dict else None
            client_tasks = type(extensions) is dict and TASKS_EXTENSION in extensions
        ctx = CallContext(structured=meta.get(STRUCTURED_META_KEY) is True, protocol_version=version,
                          operator=meta.get(OPERATOR_META_KEY) is True, client_tasks=client_tasks, **_linked(call))
        try:
            if self.max_body_bytes is not None and body_bytes > self.max_body_bytes:
                raise oversized_arguments(self.registry.get(name), params.get("arguments"), body_bytes,
                                          self.max_body_bytes)
            result = self.registry.call(name, params.get("arguments"), ctx)
        except UnknownTool:
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name} (this server has: "
                                           f"{', '.join(t['name'] for t in self.registry.listing())})") from None
        except ToolArgumentsError as exc:
            # An input validation error is a tool execution error, so the model can correct itself
            # (spec 2025-11-25 changelog, SEP-1303), not a protocol error.
            result = ToolResult(text=f"invalid arguments for {name}: {exc}", data={"error": str(exc)}, is_error=True)
        return self._tool_result(result, ctx)

    @staticmethod
    def _tool_result(result: ToolResult, ctx: CallContext) -> dict[str, Any]:
        if result.task is not None and ctx.client_tasks:
            return dict(result.task)  # a CreateTaskResult (mcp_tasks.py): only to a client that takes one
        body: dict[str, Any] = {"content": [{"type": "text", "text": result.text}], "isError": result.is_error}
        if ctx.structured:
            body["structuredContent"] = result.data
        return body

    @staticmethod
    def serialise(method: str, version: str, result: dict[str, Any]) -> dict[str, Any]:
        """Validate and shape a result with the SDK's per-version types; a mismatch is our bug, so it is logged.

        A tools/call result of the plain shape `_tool_result` builds is sent as it is: the SDK's dump of that
        shape is the shape itself in every protocol version (tests/common/test_tools.py checks it against the
        installed SDK), and the validation was a visible share of every call's path (docs/performance.md,
        "Measurements behind the code")."""
        if method == "tools/call" and (is_plain_tool_result(result, version) or result.get("resultType") == "task"):
            return result  # (the SDK's tools/call type knows no CreateTaskResult: mcp_tasks.py built and checks it)
        try:
            return serialize_server_result(method, version, result)
        except ResultMismatch:
            log.exception("result of %s does not match the %s schema", method, version)
            raise RpcError(INTERNAL_ERROR, "Internal error: the server produced an invalid result") from None
        except (KeyError, ValueError):
            return result  # a method the SDK's table does not know for this version: sent as built


_PLAIN_RESULT_KEYS = frozenset({"content", "isError", "structuredContent", "resultType"})


def is_plain_tool_result(result: dict[str, Any], version: str) -> bool:
    """Text content only, an isError flag, optionally a structuredContent object, and resultType "complete"
    exactly when `version` has it (the 2026 era requires it, the handshake era does not know it)."""
    content = result.get("content")
    modern = version in MODERN_PROTOCOL_VERSIONS
    return (result.keys() <= _PLAIN_RESULT_KEYS and type(content) is list and type(result.get("isError")) is bool
            and (result.get("resultType") == "complete" if modern else "resultType" not in result)
            and type(result.get("structuredContent", {})) is dict
            and all(type(c) is dict and c.keys() == {"type", "text"} and c["type"] == "text" and type(c["text"]) is str
                    for c in content))


def _linked(call: Any) -> dict[str, Any]:
    """The CallContext fields of a call's link to its client (none for an in-process call)."""
    if call is None:
        return {}
    return {"client_gone": call.client_gone, "cancel": call.cancel, "progress": call.progress}
