"""A tools/call that asks for progress is answered as an SSE stream; every other call exactly as before; a cancel
or a hang-up ends the call's wait at once. Raw HTTP for the wire, the official Python SDK client for what a
real client makes of it (its progress_callback, its cancel in each era)."""

import json
import socket
import time
from urllib.parse import urlsplit

import anyio
import pytest
from mcp.client.client import Client
from raw_mcp import META, MODERN, initialize, legacy_notification, post


def _raw_exchange(url: str, body: dict, headers: dict[str, str], timeout: float = 10.0) -> bytes:
    """One POST on a fresh socket; every byte of the answer until the server closes or ends it."""
    parts = urlsplit(url)
    data = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in {
        "Host": f"{parts.hostname}:{parts.port}", "Content-Type": "application/json",
        "Content-Length": str(len(data)), **headers}.items())
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(f"POST {parts.path} HTTP/1.1\r\n{head}\r\n".encode() + data)
        out = b""
        while not _complete(out):
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
    return out


def _complete(raw: bytes) -> bool:
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return False
    if b"Transfer-Encoding: chunked" in head:
        return body.endswith(b"0\r\n\r\n")
    length = [line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    return bool(length) and len(body) >= int(length[0].split(b":")[1])


def _unchunk(body: bytes) -> bytes:
    out = b""
    while body:
        size, _, rest = body.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        out, body = out + rest[:n], rest[n + 2:]
    return out


def _events(raw: bytes) -> tuple[str, list[dict]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    frames = [f for f in _unchunk(body).split(b"\r\n\r\n") if f]
    assert all(f.startswith(b"event: message\r\ndata: ") for f in frames), frames
    return head.decode(), [json.loads(f.split(b"data: ", 1)[1]) for f in frames]


def _modern_call(name: str, arguments: dict, meta: dict, request_id=7):
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": {**META, **meta}}}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}
    return body, headers


BOTH = "application/json, text/event-stream"


def test_a_call_with_a_token_streams_its_progress_then_the_response(echo_daemon):
    body, headers = _modern_call("tick", {"count": 3, "gap": 0.05}, {"progressToken": "p-1"})
    head, events = _events(_raw_exchange(echo_daemon.url, body, {**headers, "Accept": BOTH}))
    assert head.startswith("HTTP/1.1 200 OK") and "Content-Type: text/event-stream" in head
    assert "X-Accel-Buffering: no" in head and "Content-Length" not in head
    progress, last = events[:-1], events[-1]
    assert [e["method"] for e in progress] == ["notifications/progress"] * 3
    assert [e["params"]["progress"] for e in progress] == [1, 2, 3]
    assert {e["params"]["progressToken"] for e in progress} == {"p-1"}
    assert progress[0]["params"]["message"] == "tick 1 of 3" and progress[0]["params"]["total"] == 3
    assert last["id"] == 7 and last["result"]["content"][0]["text"] == "ticked=3"
    assert last["result"]["resultType"] == "complete"


def test_the_handshake_era_streams_the_same_way(echo_daemon):
    session, _ = initialize(echo_daemon.url)
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "tick", "arguments": {"count": 2}, "_meta": {"progressToken": 11}}}
    head, events = _events(_raw_exchange(echo_daemon.url, body, {
        "Accept": BOTH, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}))
    assert "Content-Type: text/event-stream" in head
    assert [e.get("method") for e in events] == ["notifications/progress", "notifications/progress", None]
    assert events[0]["params"]["progressToken"] == 11
    assert events[-1] == {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "ticked=2"}],
                                                                 "isError": False}}


@pytest.mark.parametrize("meta,accept", [({}, BOTH), ({"progressToken": "p"}, "application/json"),
                                         ({"progressToken": "p"}, "*/*"), ({"progressToken": True}, BOTH),
                                         ({"progressToken": "p"}, "application/json, text/event-stream;q=0")])
def test_a_call_that_cannot_take_a_stream_gets_one_json_body(echo_daemon, meta, accept):
    body, headers = _modern_call("tick", {"count": 2}, meta)
    raw = _raw_exchange(echo_daemon.url, body, {**headers, "Accept": accept})
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert b"Content-Type: application/json" in head and b"Content-Length" in head
    assert json.loads(payload)["result"]["content"][0]["text"] == "ticked=2"


def test_a_call_without_a_token_is_byte_for_byte_the_json_answer(echo_daemon):
    """The whole answer as a client without progress support has always had it (only the Date varies)."""
    body, headers = _modern_call("echo", {"text": "hi"}, {})
    raw = _raw_exchange(echo_daemon.url, body, {**headers, "Accept": BOTH})
    payload = (b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"echo=hi"}],"isError":false,'
               b'"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"echo-test",'
               b'"version":"0.1.0"}}}}')
    head, _, got = raw.partition(b"\r\n\r\n")
    lines = [line for line in head.split(b"\r\n") if not line.startswith(b"Date: ")]
    assert lines == [b"HTTP/1.1 200 OK", b"Content-Length: %d" % len(payload), b"Content-Type: application/json",
                     b"Server: hive"]
    assert got == payload


def test_a_call_with_a_token_that_reports_nothing_is_the_json_answer(echo_daemon):
    """The stream commits with its first notification: a call done before it has one is answered as any other."""
    body, headers = _modern_call("tick", {"count": 0}, {"progressToken": "p"})
    head, _, payload = _raw_exchange(echo_daemon.url, body, {**headers, "Accept": BOTH}).partition(b"\r\n\r\n")
    assert b"Content-Type: application/json" in head
    assert json.loads(payload)["result"]["content"][0]["text"] == "ticked=0"


def test_an_unknown_tool_with_a_token_keeps_its_error_status(echo_daemon):
    body, headers = _modern_call("nope", {}, {"progressToken": "p"})
    body["params"]["name"] = headers["Mcp-Name"] = "nope"
    head, _, payload = _raw_exchange(echo_daemon.url, body, {**headers, "Accept": BOTH}).partition(b"\r\n\r\n")
    assert b"application/json" in head and json.loads(payload)["error"]["code"] == -32602


# -- the official Python SDK client -------------------------------------------------------------------------------


async def _progress_of(url: str, mode: str):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    async with Client(url, mode=mode) as client:
        result = await client.call_tool("tick", {"count": 3, "gap": 0.05}, progress_callback=on_progress)
        plain = await client.call_tool("echo", {"text": "x"})
    return seen, result, plain


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_the_sdk_clients_progress_callback_gets_each_notification(echo_daemon, mode):
    seen, result, plain = anyio.run(_progress_of, echo_daemon.url, mode)
    assert seen == [(1, 3, "tick 1 of 3"), (2, 3, "tick 2 of 3"), (3, 3, "tick 3 of 3")]
    assert result.content[0].text == "ticked=3" and result.is_error is False
    assert plain.content[0].text == "echo=x"


def _holds(url: str, count: int = 0) -> list[dict]:
    """The hold calls that ended, once there are `count` (the echo server waits up to 10 s for them)."""
    body, headers = _modern_call("holds", {"wait": 10, "count": count}, {})
    resp, reply = post(url, body, headers)
    return json.loads(reply["result"]["content"][0]["text"])


def _holding(url: str, count: int = 0) -> int:
    """How many hold calls wait now, once there are `count` (the echo server waits up to 10 s for them)."""
    body, headers = _modern_call("holds", {"wait": 10, "holding": count}, {})
    resp, reply = post(url, body, headers)
    now = int(reply["result"]["content"][0]["text"].removeprefix("holding="))
    assert now >= count, f"{now} hold call(s) waiting, not {count}"
    return now


async def _cancel_after_first_progress(url: str, mode: str) -> float:
    first = anyio.Event()

    async def on_progress(progress, total, message):
        first.set()

    async with Client(url, mode=mode) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: client.call_tool("hold", {"seconds": 20}, progress_callback=on_progress))
            with anyio.fail_after(10):
                await first.wait()
            cancelled_at = time.monotonic()
            group.cancel_scope.cancel()
        return cancelled_at


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_cancel_by_the_sdk_client_ends_the_wait_at_once(echo_daemon, mode):
    """2026: the client closes the response stream; handshake era: it also sends notifications/cancelled."""
    before = len(_holds(echo_daemon.url))
    anyio.run(_cancel_after_first_progress, echo_daemon.url, mode)
    ended = _holds(echo_daemon.url, before + 1)[before]
    assert ended["cancelled"] and ended["gone"], ended
    assert ended["held_s"] < 5, f"the wait ran on for {ended['held_s']:.1f}s after the cancel"


def _legacy_call(url: str, session: str, body: dict) -> socket.socket:
    """A handshake-era tools/call of `session` sent on a socket of its own (left open: closing it hangs up)."""
    parts = urlsplit(url)
    data = json.dumps(body).encode()
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    sock.sendall((f"POST /mcp HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\nContent-Type: application/json\r\n"
                  f"Accept: {BOTH}\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
                  f"Content-Length: {len(data)}\r\n\r\n").encode() + data)
    return sock


def test_notifications_cancelled_ends_a_call_without_a_stream(echo_daemon):
    """A JSON call (no token) in the handshake era, cancelled from another connection of its session."""
    session, _ = initialize(echo_daemon.url)
    before, waiting = len(_holds(echo_daemon.url)), _holding(echo_daemon.url)
    body = {"jsonrpc": "2.0", "id": 41, "method": "tools/call",
            "params": {"name": "hold", "arguments": {"seconds": 20}}}
    sock = _legacy_call(echo_daemon.url, session, body)
    _holding(echo_daemon.url, waiting + 1)  # the call reached its wait
    resp, _ = legacy_notification(echo_daemon.url, session, "notifications/cancelled", {"requestId": 41})
    assert resp.status == 202
    ended = _holds(echo_daemon.url, before + 1)[before]  # before the hang-up below, which would end it too
    sock.close()
    assert ended["cancelled"] and ended["held_s"] < 5, ended


def test_a_committed_stream_cancelled_from_another_connection_ends_without_a_response(echo_daemon):
    """The stream's status and progress are sent; a cancel names the call: the stream ends, and no response
    follows (the spec: none may be sent for a cancelled request)."""
    session, _ = initialize(echo_daemon.url)
    before = len(_holds(echo_daemon.url))
    body = {"jsonrpc": "2.0", "id": 43, "method": "tools/call",
            "params": {"name": "hold", "arguments": {"seconds": 20}, "_meta": {"progressToken": "c-1"}}}
    with _legacy_call(echo_daemon.url, session, body) as sock:
        raw = b""
        while b"notifications/progress" not in raw:  # committed: the first notification is on the wire
            chunk = sock.recv(65536)
            assert chunk, raw
            raw += chunk
        resp, _ = legacy_notification(echo_daemon.url, session, "notifications/cancelled", {"requestId": 43})
        assert resp.status == 202
        while not _complete(raw):
            chunk = sock.recv(65536)
            if not chunk:
                break
            raw += chunk
    head, events = _events(raw)
    assert "Content-Type: text/event-stream" in head and raw.endswith(b"0\r\n\r\n"), raw  # ended, not cut
    assert events and all(e.get("method") == "notifications/progress" for e in events), events
    ended = _holds(echo_daemon.url, before + 1)[before]
    assert ended["cancelled"] and ended["held_s"] < 5, ended


def test_a_client_that_hangs_up_mid_stream_ends_the_wait(echo_daemon):
    before = len(_holds(echo_daemon.url))
    body, headers = _modern_call("hold", {"seconds": 20}, {"progressToken": "h"})
    parts = urlsplit(echo_daemon.url)
    data = json.dumps(body).encode()
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    head = "".join(f"{k}: {v}\r\n" for k, v in {**headers, "Accept": BOTH, "Content-Type": "application/json",
                                                 "Content-Length": str(len(data))}.items())
    sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: {parts.hostname}\r\n{head}\r\n".encode() + data)
    first = sock.recv(65536)
    while b"notifications/progress" not in first:
        first += sock.recv(65536)
    assert b"text/event-stream" in first
    sock.close()
    ended = _holds(echo_daemon.url, before + 1)[before]
    assert ended["cancelled"] and ended["held_s"] < 5, ended


@pytest.mark.slow
def test_a_cancel_from_another_session_does_not_touch_the_call(echo_daemon):
    """notifications/cancelled names a request id of its own session: another client cannot end this wait."""
    mine, theirs = initialize(echo_daemon.url)[0], initialize(echo_daemon.url)[0]
    before, waiting = len(_holds(echo_daemon.url)), _holding(echo_daemon.url)
    body = {"jsonrpc": "2.0", "id": 77, "method": "tools/call",
            "params": {"name": "hold", "arguments": {"seconds": 1.5}}}
    with _legacy_call(echo_daemon.url, mine, body):
        _holding(echo_daemon.url, waiting + 1)  # the call reached its wait
        resp, _ = legacy_notification(echo_daemon.url, theirs, "notifications/cancelled", {"requestId": 77})
        assert resp.status == 202
        ended = _holds(echo_daemon.url, before + 1)[before]
    assert not ended["cancelled"] and ended["held_s"] >= 1.4, ended


def test_a_huge_progress_token_is_answered_without_a_stream(echo_daemon):
    """The token is echoed in every notification: one over 256 characters gets the plain answer."""
    body, headers = _modern_call("tick", {"count": 2}, {"progressToken": "t" * 300})
    head, _, payload = _raw_exchange(echo_daemon.url, body, {**headers, "Accept": BOTH}).partition(b"\r\n\r\n")
    assert b"application/json" in head and json.loads(payload)["result"]["content"][0]["text"] == "ticked=2"


def test_the_operator_clients_call_reads_a_streamed_answer(echo_daemon):
    """common.protocol.client (the operator CLIs' client) with on_progress: each message as it comes, then the
    result."""
    from common.protocol.client import call_tool

    seen = []
    result = call_tool(echo_daemon.url, "tick", {"count": 3, "gap": 0.05}, on_progress=seen.append)
    assert seen == ["tick 1 of 3", "tick 2 of 3", "tick 3 of 3"] and result.text == "ticked=3"
    assert call_tool(echo_daemon.url, "tick", {"count": 2}).text == "ticked=2"  # no callback: a plain call
