"""Helpers for the robustness tests: raw HTTP over a plain socket (so a test can send what no well-behaved
client library would: bad versions, latin-1 bytes in headers, invalid UTF-8 bodies), the invariants every
answer must satisfy, and a small MCP call helper for driving real daemons.

Imported as kit.robust_kit by the robustness tests.
"""

import http.client
import json
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
TOKEN = "robust-t0ken-\u00e9-value"  # the token_echo daemon's; non-ASCII on purpose: it must work sent as UTF-8
HEADERS_BASE = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def _b(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")


def build_request(method: str | bytes, target: str | bytes, version: str | bytes,
                  headers: list[tuple[str | bytes, str | bytes]], body: bytes | None) -> bytes:
    """The request's bytes as given; a correct Content-Length is added unless the caller sent one."""
    names = {_b(k).lower() for k, _ in headers}
    lines = [_b(method) + b" " + _b(target) + b" " + _b(version)]
    lines += [_b(k) + b": " + _b(v) for k, v in headers]
    if body is not None and b"content-length" not in names and b"transfer-encoding" not in names:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


def exchange(url: str, data: bytes, method: str = "POST", timeout: float = 20.0) -> RawResponse:
    """Send raw bytes to the daemon at `url` and read one HTTP response (raises if none comes)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(data)
        resp = http.client.HTTPResponse(sock, method=method if method == "HEAD" else None)
        resp.begin()
        body = resp.read()
        return RawResponse(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)


def host_of(url: str) -> str:
    parts = urlsplit(url)
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname  # an IPv6 literal
    return f"{host}:{parts.port}"


def post_json(url: str, body: Any, headers: dict[str, str | None] | None = None, method: str = "POST",
              timeout: float = 20.0) -> RawResponse:
    """A well-formed POST to /mcp with `headers` overriding (None drops one)."""
    merged: dict[str, str | None] = {"Host": host_of(url), **HEADERS_BASE, **(headers or {})}
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    pairs = [(k, v) for k, v in merged.items() if v is not None]
    return exchange(url, build_request(method, urlsplit(url).path, "HTTP/1.1", pairs, data), method, timeout)


def modern_call(url: str, method: str, params: dict | None = None, headers: dict | None = None,
                request_id: Any = 1, timeout: float = 20.0) -> RawResponse:
    params = dict(params or {})
    params.setdefault("_meta", META)
    h: dict[str, str | None] = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        h["Mcp-Name"] = params.get("name")
    h.update(headers or {})
    return post_json(url, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, h, timeout=timeout)


def call_tool_raw(url: str, name: str, arguments: Any, token: str | None = None,
                  structured: bool = True, timeout: float = 20.0) -> RawResponse:
    meta = dict(META, **({"hive/structured": True} if structured else {}))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return modern_call(url, "tools/call", {"name": name, "arguments": arguments, "_meta": meta}, headers,
                       timeout=timeout)


def _unsupported_transfer_coding(request: bytes) -> bool:
    head = request.split(b"\r\n\r\n", 1)[0].lower()
    return b"\r\ntransfer-encoding:" in head and b"\r\ntransfer-encoding: chunked\r\n" not in head + b"\r\n"


def assert_well_formed_answer(resp: RawResponse, method: str = "POST", request: bytes = b"") -> None:
    """The invariants of every answer: no 5xx; a 4xx says what is wrong; every JSON-RPC error has a code and a
    non-empty message."""
    if resp.status == 501 and _unsupported_transfer_coding(request):
        return  # waitress refusing a transfer coding it does not implement (gzip...): RFC 9112 section 6.1 asks for 501
    assert resp.status < 500, f"server error {resp.status}: {resp.text()[:500]}"
    payload: Any = None
    if resp.body and resp.headers.get("content-type", "").startswith("application/json"):
        payload = resp.json()  # a JSON content type must carry JSON
    if 400 <= resp.status < 500 and method != "HEAD":
        assert resp.body.strip(), f"{resp.status} with an empty body: the refusal must name the problem"
    for message in payload if isinstance(payload, list) else [payload]:
        if isinstance(message, dict) and "error" in message:
            error = message["error"]
            assert isinstance(error.get("code"), int), f"JSON-RPC error without an integer code: {message}"
            assert isinstance(error.get("message"), str) and error["message"].strip(), (
                f"error without a message: {message}")
    if 400 <= resp.status < 500 and isinstance(payload, dict):
        assert "error" in payload, f"{resp.status} JSON answer that is not a JSON-RPC error: {payload}"


def tool_result(resp: RawResponse) -> dict:
    """The `result` of a tools/call answer (asserting it is one)."""
    assert resp.status == 200, f"{resp.status}: {resp.text()[:500]}"
    body = resp.json()
    assert "result" in body, body
    return body["result"]


def result_text(result: dict) -> str:
    return "".join(part.get("text", "") for part in result.get("content", []))
