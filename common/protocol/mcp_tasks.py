"""The MCP tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28 era only): a tool call that outlives its
answer becomes a task the client polls with `tasks/get` and stops with `tasks/cancel`.

What is here is the wire, shared by both daemons: whether a request declared the extension, the shapes of a task
and of a CreateTaskResult (`ttlMs`, `pollIntervalMs`: integer milliseconds, the names real clients and the
conformance suite accept), the handle (a daemon's own id, '-', a secret of 128 bits), and `TaskMethods`, the
dispatch of `tasks/*` over a daemon's `TaskHandles`. What a task is, and when a call answers with one, is the
daemon's (docs/design.md, "MCP tasks").
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from mcp_types.jsonrpc import HEADER_MISMATCH, INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY

from common.protocol.wire_types import (
    MCP_NAME_HEADER,
    InboundLadderRejection,
    decode_header_value,
)

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
# Claude Code shows the model this text with the handle, at once (FACTS: "MCP tasks in Claude Code").
AGENT_TASK_META = "com.anthropic/agent-task"
# The methods that name a task: params.taskId, mirrored in the Mcp-Name header (as tools/call's name is).
NAMED_METHODS = frozenset({"tasks/get", "tasks/cancel", "tasks/update"})
# Methods of the extension's first draft, removed from it: -32601 like any unknown method.
REMOVED_METHODS = frozenset({"tasks/list", "tasks/result"})
SECRET_BYTES = 16  # 128 bits: a handle cannot be guessed from the task id it begins with
MAX_HANDLE_CHARS = 128  # what clients accept: 1-128 characters of [\x21-\x7e]
UNKNOWN_HANDLE = "Invalid params: no task with this taskId (unknown, expired, or not this server's)"

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]


def declares_tasks(params: Any) -> bool:
    """Whether a request's `_meta[clientCapabilities].extensions` declares the tasks extension."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    caps = meta.get(CLIENT_CAPABILITIES_META) if isinstance(meta, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def new_handle(prefix: str) -> str:
    """`<prefix>-<32 hex digits>`: a person reading the client's task list recognises the prefix (a task id, a
    session name); the secret makes it unguessable. `prefix` is printable ASCII of at most 95 characters."""
    secret = secrets.token_hex(SECRET_BYTES)
    if not (0 < len(prefix) <= MAX_HANDLE_CHARS - len(secret) - 1 and _printable(prefix)):
        raise ValueError(f"a task handle's prefix must be 1-95 printable ASCII characters, not {prefix!r}")
    return f"{prefix}-{secret}"


def handle_prefix(handle: str) -> str | None:
    """The daemon's id a handle begins with (None: not of new_handle's shape)."""
    prefix, sep, secret = handle.rpartition("-")
    return prefix if sep and prefix and len(secret) == 2 * SECRET_BYTES else None


def same_handle(stored: str | None, given: str) -> bool:
    """`given` is the handle kept: compared in constant time (no timing oracle for the secret)."""
    return stored is not None and hmac.compare_digest(stored.encode(), given.encode())


def _printable(text: str) -> bool:
    return all("\x21" <= c <= "\x7e" for c in text)


def iso_time(epoch: float) -> str:
    """ISO 8601 in UTC with milliseconds, as createdAt and lastUpdatedAt carry it."""
    whole = int(epoch)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((epoch - whole) * 1000):03d}Z"


def poll_interval_ms(age_seconds: float) -> int:
    """How often to poll a task of that age: soon while it is young (most tasks end in seconds), then less."""
    if age_seconds < 10:
        return 1000
    if age_seconds < 120:
        return 2000
    if age_seconds < 900:
        return 5000
    return 15000


@dataclass(frozen=True)
class TaskState:
    """A task as `tasks/get` shows it. `result`: the CallToolResult of a completed task (`content`, `isError`);
    `error`: the JSON-RPC error object of a failed one (the daemon's own failure, never the tool's)."""

    status: Status
    created_at: float  # epoch seconds
    updated_at: float
    ttl_ms: int | None  # how long from now it may still be pruned after (None: no limit known)
    poll_interval_ms: int | None = None
    status_message: str | None = None
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None

    def wire(self, handle: str) -> dict[str, Any]:
        """The Task object: what a CreateTaskResult and a `tasks/get` answer share."""
        body: dict[str, Any] = {"taskId": handle, "status": self.status, "createdAt": iso_time(self.created_at),
                                "lastUpdatedAt": iso_time(self.updated_at), "ttlMs": self.ttl_ms}
        if self.poll_interval_ms is not None:
            body["pollIntervalMs"] = int(self.poll_interval_ms)
        if self.status_message is not None:
            body["statusMessage"] = self.status_message
        if self.status == "completed" and self.result is not None:
            body["result"] = dict(self.result)
        if self.status == "failed" and self.error is not None:
            body["error"] = dict(self.error)
        return body


def create_task_result(handle: str, state: TaskState, immediate: str | None = None) -> dict[str, Any]:
    """A `tools/call` answered with a task (`resultType: "task"`); `immediate`: what the model reads now
    (`_meta["com.anthropic/agent-task"].modelImmediateResponse`)."""
    body = state.wire(handle)
    body.pop("result", None)
    body.pop("error", None)
    body["resultType"] = "task"
    if immediate:
        body["_meta"] = {AGENT_TASK_META: {"modelImmediateResponse": immediate}}
    return body


def call_tool_result(text: str, is_error: bool = False) -> dict[str, Any]:
    """A completed task's inlined result: the plain CallToolResult a `tools/call` answers."""
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


class UnknownHandle(LookupError):
    """No task of this server has that handle (never had, pruned, or a wrong secret: one answer for all)."""


class TaskHandles(Protocol):
    """What a daemon implements for the extension. Each method is called for a request that declared it; each
    raises UnknownHandle for a handle it does not hold (compare the secret with `same_handle`)."""

    def get(self, handle: str) -> TaskState:
        """The task now. A client's poll: a daemon may count an end it returns as delivered to the model."""
        ...

    def cancel(self, handle: str) -> None:
        """Stop the task (as the daemon's own kill/interrupt would) without waiting for its end; a task that has
        ended already is left as it is (Claude Code sends two cancels a millisecond apart)."""
        ...

    def known(self, handle: str) -> bool:
        """Whether the handle is one of this server's (tasks/update: nothing else is looked at)."""
        ...


@dataclass
class TaskRpcError(Exception):
    """A JSON-RPC error of the tasks surface (common.protocol.methods turns it into its RpcError)."""

    code: int
    message: str
    data: Any = None


class TaskMethods:
    """`tasks/get`, `tasks/cancel` and `tasks/update` over a daemon's handles; `tasks/list` and `tasks/result`
    are not methods (-32601). `enabled` False (--mcp-tasks off, or a daemon without handles): every `tasks/*`
    is unknown, as before the extension."""

    def __init__(self, handles: TaskHandles | None, enabled: bool = True):
        self.handles = handles
        self.enabled = enabled and handles is not None

    def serves(self, method: str) -> bool:
        return self.enabled and method in NAMED_METHODS

    def dispatch(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if not self.serves(method) or self.handles is None:
            raise TaskRpcError(METHOD_NOT_FOUND, f"Method not found: {method}", method)
        if not declares_tasks(params):
            raise TaskRpcError(MISSING_REQUIRED_CLIENT_CAPABILITY,
                               f"Client did not declare required extension {TASKS_EXTENSION!r}",
                               {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})
        handle = params.get("taskId")
        if not isinstance(handle, str) or not 0 < len(handle) <= MAX_HANDLE_CHARS:
            raise TaskRpcError(INVALID_PARAMS, "Invalid params: taskId must be a string of 1-128 characters")
        try:
            if method == "tasks/get":
                return {"resultType": "complete", **self.handles.get(handle).wire(handle)}
            if method == "tasks/cancel":
                self.handles.cancel(handle)
            elif not self.handles.known(handle):  # tasks/update: no input was ever asked, so none is taken
                raise UnknownHandle(handle)
        except UnknownHandle:
            raise TaskRpcError(INVALID_PARAMS, UNKNOWN_HANDLE) from None
        return {}


def name_rejection(body: Mapping[str, Any], headers: Mapping[str, str]) -> InboundLadderRejection | None:
    """The extension's routing rule, after the SDK's 2026 ladder passed a request of NAMED_METHODS: it carries
    `Mcp-Name: <params.taskId>` (a missing or different header: -32020, HTTP 400, as for tools/call's name)."""
    params = body.get("params")
    task_id = params.get("taskId") if isinstance(params, Mapping) else None
    if task_id is not None and decode_header_value(headers.get(MCP_NAME_HEADER)) != task_id:
        return InboundLadderRejection(code=HEADER_MISMATCH,
                                      message=f"{MCP_NAME_HEADER} header does not match the request body's "
                                              "'taskId' parameter")
    return None
