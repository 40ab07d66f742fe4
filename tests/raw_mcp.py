"""Raw HTTP helpers for the transport's tests (http.client, one connection a request): POST a body, the
2026 era's headers, the handshake era's initialize and session calls."""

import http.client
import json
from urllib.parse import urlsplit

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def post(url, body, headers=None, method="POST", raw=False):
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    base.update(headers or {})
    base = {k: v for k, v in base.items() if v is not None}
    conn.request(method, parts.path, body=data, headers=base)
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    if raw:
        return resp, payload
    try:
        return resp, json.loads(payload) if payload else None
    except ValueError:
        return resp, payload.decode()


def modern(url, method, params=None, headers=None, request_id=1):
    params = dict(params or {})
    params.setdefault("_meta", META)
    h = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        h["Mcp-Name"] = params.get("name")
    h.update(headers or {})
    return post(url, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, h)


def initialize(url, version="2025-11-25"):
    resp, body = post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    assert resp.status == 200, body
    return resp.getheader("Mcp-Session-Id"), body


def legacy(url, session, method, params=None, version="2025-11-25", request_id=1):
    return post(url, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}},
                {"Mcp-Session-Id": session, "MCP-Protocol-Version": version})


def legacy_notification(url, session, method, params=None, version="2025-11-25"):
    """A notification of a handshake-era session (no id: `notifications/cancelled`); the server answers 202."""
    return post(url, {"jsonrpc": "2.0", "method": method, "params": params or {}},
                {"Mcp-Session-Id": session, "MCP-Protocol-Version": version})
