"""A minimal MCP client for the operator CLIs: one `tools/call` is one POST in protocol 2026-07-28.

Importing the official SDK client costs ~0.7 s (docs/design.md, "MCP clients"); a CLI command must feel instant, so this
speaks the stateless revision directly with `http.client`. The official client stays the reference in tests.
"""

import http.client
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

PROTOCOL_VERSION = "2026-07-28"
STRUCTURED_META_KEY = "hive/structured"  # must match common.protocol.methods.STRUCTURED_META_KEY
OPERATOR_META_KEY = "hive/operator"  # must match common.protocol.methods.OPERATOR_META_KEY
_ids = itertools.count(1)


class McpClientError(Exception):
    """The daemon could not be reached, or answered with a protocol error; the message says which."""


@dataclass
class ToolCallResult:
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False


def call_tool(url: str, name: str, arguments: dict[str, Any], *, token: str | None = None, timeout: float = 60.0,
              operator: bool = True, on_progress: Callable[[str], None] | None = None) -> ToolCallResult:
    """Call one tool, asking for structured data; raise McpClientError when there is no tool result.
    `operator=False` calls as the agent would (the docs' examples show what the model reads). With
    `on_progress`, a waiting call's progress messages are handed to it as they come (the answer streams)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "hive-cli", "version": "1"},
        STRUCTURED_META_KEY: True,
    }
    if operator:
        meta[OPERATOR_META_KEY] = True  # the operator's look must not clear the agent's todos (common.protocol.methods)
    if on_progress is not None:
        meta["progressToken"] = "cli"
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": meta}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    status, payload = _post(url, json.dumps(body).encode(), headers, timeout, on_progress)
    if "error" in payload:
        err = payload["error"]
        raise McpClientError(f"{name}: {err.get('message', 'error')} (JSON-RPC {err.get('code')}, HTTP {status})")
    result = payload.get("result") or {}
    text = "\n".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
    return ToolCallResult(text=text, data=result.get("structuredContent") or {}, is_error=bool(result.get("isError")))


def _post(url: str, body: bytes, headers: dict[str, str], timeout: float,
          on_progress: Callable[[str], None] | None = None) -> tuple[int, dict[str, Any]]:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise McpClientError(f"url {url!r}: must look like http://127.0.0.1:7711/mcp")
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    try:
        conn.request("POST", parts.path or "/mcp", body=body, headers=headers)
        response = conn.getresponse()
        if response.getheader("Content-Type", "").startswith("text/event-stream"):
            raw = _last_event(response, on_progress or (lambda message: None))
        else:
            raw = response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise McpClientError(f"cannot reach {url}: {exc} (is the daemon running?)") from None
    finally:
        conn.close()
    if response.status == 401:
        raise McpClientError(f"{url}: unauthorized (pass --token-file with the daemon's token)")
    try:
        payload = json.loads(raw)
    except ValueError:
        raise McpClientError(f"{url}: HTTP {response.status}: {raw[:200].decode(errors='replace').strip()}") from None
    if not isinstance(payload, dict):
        raise McpClientError(f"{url}: unexpected answer (HTTP {response.status})")
    return response.status, payload


def _last_event(response: http.client.HTTPResponse, on_progress: Callable[[str], None]) -> bytes:
    """Read a streamed answer: each progress message to `on_progress` as it arrives; the response's bytes."""
    last = b""
    while line := response.readline():
        if not line.startswith(b"data: "):
            continue
        try:
            message = json.loads(line[6:])
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("method") == "notifications/progress":
            on_progress(str((message.get("params") or {}).get("message", "")))
        else:
            last = line[6:]
    return last
