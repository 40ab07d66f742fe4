"""Raw HTTP against the real transport: every error path gets its status code and a body that names the problem."""

import http.client
import json
from urllib.parse import urlsplit

import pytest
from raw_mcp import META, MODERN, initialize, legacy, modern, post

# -- 2026-07-28 --------------------------------------------------------------------------------------------------

def test_discover_carries_versions_caching_and_server_info(echo_daemon):
    resp, body = modern(echo_daemon.url, "server/discover")
    assert resp.status == 200
    result = body["result"]
    assert result["supportedVersions"] == [MODERN]
    assert result["resultType"] == "complete" and result["ttlMs"] >= 0 and result["cacheScope"] in ("public", "private")
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "echo-test"
    assert "tools" in result["capabilities"]


def test_modern_tools_list_and_call(echo_daemon):
    resp, body = modern(echo_daemon.url, "tools/list")
    assert resp.status == 200
    names = [t["name"] for t in body["result"]["tools"]]
    assert names[:2] == ["echo", "refuse"] and "ttlMs" in body["result"]
    resp, body = modern(echo_daemon.url, "tools/call", {"name": "echo", "arguments": {"text": "hi", "times": 2}})
    assert resp.status == 200
    assert body["result"]["content"] == [{"type": "text", "text": "echo=hihi"}]
    assert "structuredContent" not in body["result"], "text only unless structured data is asked for"


def test_structured_content_only_when_asked(echo_daemon):
    meta = dict(META, **{"hive/structured": True})
    resp, body = modern(echo_daemon.url, "tools/call", {"name": "echo", "arguments": {"text": "x"}, "_meta": meta})
    assert body["result"]["structuredContent"] == {"echo": "x"}


def test_header_body_mismatch_is_32020(echo_daemon):
    resp, body = modern(echo_daemon.url, "tools/list", headers={"Mcp-Method": "tools/call"})
    assert resp.status == 400 and body["error"]["code"] == -32020
    resp, body = modern(echo_daemon.url, "tools/call", {"name": "echo", "arguments": {"text": "x"}},
                        headers={"Mcp-Name": "refuse"})
    assert resp.status == 400 and body["error"]["code"] == -32020


def test_a_routing_header_sent_twice_is_refused(echo_daemon):
    """The server folds repeated header lines into one value ("a, b"): never the value of the body, so a
    duplicated Mcp-Method or Mcp-Name is refused by the header/body comparison, whatever the copies say."""
    parts = urlsplit(echo_daemon.url)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": META}}).encode()
    for name, value in (("Mcp-Method", "tools/call"), ("Mcp-Name", "echo")):
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        conn.putrequest("POST", parts.path)
        headers = [("Content-Type", "application/json"), ("Accept", "application/json"),
                   ("MCP-Protocol-Version", MODERN), ("Mcp-Method", "tools/call"), ("Mcp-Name", "echo"),
                   (name, value), ("Content-Length", str(len(body)))]
        for key, val in headers:
            conn.putheader(key, val)
        conn.endheaders(body)
        resp = conn.getresponse()
        answer = json.loads(resp.read())
        conn.close()
        assert resp.status == 400 and answer["error"]["code"] == -32020, (name, answer)


def test_unsupported_modern_version_is_32022_with_data(echo_daemon):
    meta = {"io.modelcontextprotocol/protocolVersion": "2099-01-01", "io.modelcontextprotocol/clientCapabilities": {}}
    resp, body = post(echo_daemon.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}},
                      {"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"})
    assert resp.status == 400 and body["error"]["code"] == -32022
    assert body["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}


def test_missing_meta_is_invalid_params(echo_daemon):
    resp, body = post(echo_daemon.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                      {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
    assert resp.status == 400 and body["error"]["code"] == -32602 and "_meta" in body["error"]["message"]


@pytest.mark.parametrize("method", ["initialize", "ping", "resources/list"])
def test_removed_or_unknown_methods_are_404(echo_daemon, method):
    resp, body = modern(echo_daemon.url, method)
    assert resp.status == 404 and body["error"]["code"] == -32601


def test_modern_get_and_delete_are_405(echo_daemon):
    for method in ("GET", "DELETE"):
        resp, _ = post(echo_daemon.url, None, {"MCP-Protocol-Version": MODERN}, method=method)
        assert resp.status == 405 and "POST" in resp.getheader("Allow")


def test_modern_batch_is_invalid_request(echo_daemon):
    resp, body = post(echo_daemon.url, [{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}],
                      {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
    assert resp.status == 400 and body["error"]["code"] == -32600


def test_modern_notification_is_accepted(echo_daemon):
    resp, body = post(echo_daemon.url,
                      {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
                      {"MCP-Protocol-Version": MODERN, "Mcp-Method": "notifications/cancelled"})
    assert resp.status == 202 and not body


# -- handshake era -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_initialize_negotiates_each_handshake_version(echo_daemon, version):
    session, body = initialize(echo_daemon.url, version)
    assert body["result"]["protocolVersion"] == version
    assert session and all(0x21 <= ord(c) <= 0x7E for c in session)
    assert body["result"]["serverInfo"]["name"] == "echo-test"


def test_unknown_version_offer_gets_our_latest(echo_daemon):
    _, body = initialize(echo_daemon.url, "1999-01-01")
    assert body["result"]["protocolVersion"] == "2025-11-25"


def test_session_flow_initialized_202_list_call_delete(echo_daemon):
    session, _ = initialize(echo_daemon.url)
    resp, body = post(echo_daemon.url, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                      {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}, raw=True)
    assert resp.status == 202 and body == b""
    resp, body = legacy(echo_daemon.url, session, "ping")
    assert resp.status == 200 and body["result"] == {}
    resp, body = legacy(echo_daemon.url, session, "tools/call", {"name": "echo", "arguments": {"text": "a"}})
    assert body["result"]["content"][0]["text"] == "echo=a" and "resultType" not in body["result"]
    resp, _ = post(echo_daemon.url, None, {"Mcp-Session-Id": session}, method="DELETE")
    assert resp.status in (200, 204)
    resp, _ = legacy(echo_daemon.url, session, "ping")
    assert resp.status == 404


def test_missing_session_is_400_unknown_is_404(echo_daemon):
    resp, body = post(echo_daemon.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                      {"MCP-Protocol-Version": "2025-11-25"})
    assert resp.status == 400 and "Mcp-Session-Id" in body
    resp, body = legacy(echo_daemon.url, "nope", "tools/list")
    assert resp.status == 404


def test_get_is_405_in_handshake_era(echo_daemon):
    session, _ = initialize(echo_daemon.url)
    resp, _ = post(echo_daemon.url, None, {"Mcp-Session-Id": session, "Accept": "text/event-stream"}, method="GET")
    assert resp.status == 405


def test_batches_only_in_2025_03_26(echo_daemon):
    session, _ = initialize(echo_daemon.url, "2025-03-26")
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
             {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    resp, body = post(echo_daemon.url, batch, {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-03-26"})
    assert resp.status == 200 and sorted(r["id"] for r in body) == [1, 2]
    session, _ = initialize(echo_daemon.url, "2025-06-18")
    resp, body = post(echo_daemon.url, batch, {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"})
    assert resp.status == 400 and body["error"]["code"] == -32600 and "2025-03-26" in body["error"]["message"]


def test_tool_errors(echo_daemon):
    session, _ = initialize(echo_daemon.url)
    _, body = legacy(echo_daemon.url, session, "tools/call", {"name": "nope", "arguments": {}})
    assert body["error"]["code"] == -32602 and "nope" in body["error"]["message"]
    _, body = legacy(echo_daemon.url, session, "tools/call", {"name": "echo", "arguments": {"text": 3, "times": 9}})
    result = body["result"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "text: must be of type string" in text and "times: must be <= 5" in text
    _, body = legacy(echo_daemon.url, session, "tools/call", {"name": "refuse"})
    assert body["result"]["isError"] and "always refuses" in body["result"]["content"][0]["text"]
    _, body = legacy(echo_daemon.url, session, "tools/call", {"name": "crash"})
    assert body["result"]["isError"] and "RuntimeError: boom" in body["result"]["content"][0]["text"]
    assert "Traceback" not in body["result"]["content"][0]["text"]
    resp, body = legacy(echo_daemon.url, session, "ping")
    assert resp.status == 200, "the server keeps serving after a tool crashed"


# -- HTTP-level refusals -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("host",
                         ["evil.example", "localhost.evil.example", "127.0.0.1.evil.example", "evil.example:80"])
def test_foreign_host_is_refused(echo_daemon, host):
    resp, body = modern(echo_daemon.url, "tools/list", headers={"Host": host})
    assert resp.status == 421 and "Host" in body


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1:9", "[::1]:1234", "LOCALHOST"])
def test_loopback_hosts_are_accepted(echo_daemon, host):
    resp, _ = modern(echo_daemon.url, "tools/list", headers={"Host": host})
    assert resp.status == 200


@pytest.mark.parametrize("origin", ["http://evil.example", "http://localhost.evil.example", "null", "file://"])
def test_foreign_origin_is_refused(echo_daemon, origin):
    resp, body = modern(echo_daemon.url, "tools/list", headers={"Origin": origin})
    assert resp.status == 403 and "Origin" in body


def test_the_daemons_own_origin_is_accepted_and_another_port_is_not(echo_daemon):
    port = echo_daemon.url.rsplit(":", 1)[1].split("/")[0]
    resp, _ = modern(echo_daemon.url, "tools/list", headers={"Origin": f"http://localhost:{port}"})
    assert resp.status == 200
    resp, _ = modern(echo_daemon.url, "tools/list", headers={"Origin": "http://localhost:3000"})
    assert resp.status == 403, "a local dev server's page is another origin"


def test_wrong_content_type_is_415(echo_daemon):
    resp, body = modern(echo_daemon.url, "tools/list", headers={"Content-Type": "text/plain"})
    assert resp.status == 415 and "application/json" in body


def test_accept_without_json_is_406(echo_daemon):
    resp, body = modern(echo_daemon.url, "tools/list", headers={"Accept": "text/html"})
    assert resp.status == 406


def test_oversized_body_is_413(echo_daemon):
    """Over the ceiling (8 x the 1 MiB limit; tests/bash/test_oversized_call.py has what lies between): refused
    on the declared length, before the body is read (a raw socket: a client still sending a body the server
    has refused may see the reset first, which is HTTP's reality, not what we test)."""
    import socket
    parts = urlsplit(echo_daemon.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {8 * 1024 * 1024 + 10}\r\n\r\n{{".encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]


@pytest.mark.parametrize("payload", [b"{", b"\xff\xfe", b"[" * 100000, b"1" * 5000, b""])
def test_malformed_json_is_parse_error_not_500(echo_daemon, payload):
    for headers in ({"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}, {}):
        resp, body = post(echo_daemon.url, payload, headers)
        assert resp.status == 400, body
        assert body["error"]["code"] == -32700


def test_healthz_and_unknown_path(echo_daemon):
    resp, body = post(echo_daemon.base + "/healthz", None, method="GET")
    assert resp.status == 200 and body["ok"] is True
    resp, body = post(echo_daemon.base + "/other", None, method="GET")
    assert resp.status == 404 and "/mcp" in body
