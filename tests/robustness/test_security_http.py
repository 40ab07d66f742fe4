"""Security of the HTTP surface, against real daemons: DNS-rebinding style Host and Origin values, the bearer
token (missing, wrong, near misses, right; non-ASCII), and what a refused request may learn or leave behind.

tests/common covers the plain cases (a foreign host, a foreign origin, the right and a wrong token); these are
the tricky spellings an attacker or a lax parser would try.
"""

import json
import re
import socket

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kit.fuzz_budget import examples
from kit.robust_kit import META, MODERN, TOKEN, build_request, call_tool_raw, exchange, host_of, modern_call, post_json

FUZZ = settings(max_examples=examples(100), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def _port(url: str) -> str:
    return host_of(url).rsplit(":", 1)[1]


# -- Host: exact names only ------------------------------------------------------------------------------------------

FOREIGN_HOSTS = [
    "evil.example", "localhost.evil.example", "127.0.0.1.nip.io", "127.0.0.1.evil.example", "localhost.", "127.0.0.1.",
    "[::1].evil.example", "[::1]evil", "[::1", "::1]", "localhost:80@evil.example", "evil.example#@localhost",
    "localhost:evil", "127.0.0.1:80:80", "[::ffff:127.0.0.1]", "127.1", "2130706433", "0x7f000001", "0.0.0.0",
    "127.0.0.1 evil.example", "127.0.0.1,evil.example", "", "mcp.internal.example.evil",
]


@pytest.mark.parametrize("host", FOREIGN_HOSTS)
def test_dns_rebinding_hosts_are_refused(robust_echo, host):
    resp = modern_call(robust_echo.url, "tools/list", headers={"Host": host})
    assert resp.status in (400, 421), f"Host {host!r} was served: {resp.status} {resp.text()[:200]}"
    assert resp.body.strip(), "the refusal names the problem"
    assert b'"tools"' not in resp.body


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST", "127.0.0.1", "[::1]", "[::1]:1", "::1", "localhost:",
                                  "127.0.0.1:<port>"])
def test_loopback_host_spellings_are_served(robust_echo, host):
    host = host.replace("<port>", _port(robust_echo.url))
    assert modern_call(robust_echo.url, "tools/list", headers={"Host": host}).status == 200


def test_two_host_headers_are_not_read_as_the_good_one(robust_echo):
    """A request with two Host headers (RFC 9112 asks for a 400) must not pass because the first one is ours."""
    good = host_of(robust_echo.url)
    for pair in ([good, "evil.example"], ["evil.example", good]):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}).encode()
        headers = [("Host", h) for h in pair] + [("Content-Type", "application/json"), ("MCP-Protocol-Version", MODERN),
                                                 ("Mcp-Method", "tools/list")]
        resp = exchange(robust_echo.url, build_request("POST", "/mcp", "HTTP/1.1", headers, body))
        assert resp.status in (400, 421), f"Host headers {pair} were served: {resp.status}"


def test_healthz_is_guarded_too(robust_echo):
    resp = exchange(robust_echo.url,
                    build_request("GET", "/healthz", "HTTP/1.1", [("Host", "evil.example")], None), "GET")
    assert resp.status == 421 and b"echo-test" not in resp.body


def test_extra_allowed_host_is_exact(token_echo):
    auth = {"Authorization": f"Bearer {TOKEN}".encode()}
    assert modern_call(token_echo.url, "tools/list",
                       headers={"Host": "mcp.internal.example:7711", **auth}).status == 200
    for host in ("mcp.internal.example.evil", "evil.mcp.internal.example", "mcp.internal.example@evil"):
        assert modern_call(token_echo.url, "tools/list", headers={"Host": host, **auth}).status == 421, host


# -- Origin: only the daemon's own origin (and the configured ones) ---------------------------------------------------

FOREIGN_ORIGINS = [
    "http://evil.example", "http://localhost.evil.example", "http://127.0.0.1.nip.io",
    "null", "file://", "ws://localhost",
    "http://localhost@evil.example", "http://evil.example?x=http://localhost", "http://evil.example#@localhost",
    "http://[::1].evil.example", "http://localhost:abc", "http://localhost/../evil", "https://app.example",
    "http://localhost\\@evil.example", "javascript:alert(1)//localhost",
    # loopback, but another port or scheme: a page of a local dev server is another origin
    "http://localhost", "http://LOCALHOST:3000", "https://127.0.0.1:8443", "http://[::1]:80",
    "https://localhost:<port>",
]


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
def test_foreign_origins_are_refused(robust_echo, origin):
    origin = origin.replace("<port>", _port(robust_echo.url))
    resp = modern_call(robust_echo.url, "tools/list", headers={"Origin": origin})
    assert resp.status == 403, f"Origin {origin!r} was served: {resp.status} {resp.text()[:200]}"
    assert b"Origin" in resp.body


@pytest.mark.parametrize("origin", ["http://localhost:<port>", "http://LOCALHOST:<port>", "http://127.0.0.1:<port>",
                                    "http://[::1]:<port>", "http://localhost:<port>/"])
def test_the_daemons_own_origins_are_served(robust_echo, origin):
    origin = origin.replace("<port>", _port(robust_echo.url))
    assert modern_call(robust_echo.url, "tools/list", headers={"Origin": origin}).status == 200


def test_configured_origin_is_exact(token_echo):
    auth = {"Authorization": f"Bearer {TOKEN}".encode()}
    assert modern_call(token_echo.url, "tools/list", headers={"Origin": "https://app.example", **auth}).status == 200
    assert modern_call(token_echo.url, "tools/list", headers={"Origin": "https://APP.example/", **auth}).status == 200
    for origin in ("http://app.example", "https://app.example.evil", "https://app.example:444",
                   "https://evil.app.example"):
        assert modern_call(token_echo.url, "tools/list", headers={"Origin": origin, **auth}).status == 403, origin


@FUZZ
@given(host=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=30))
def test_only_loopback_names_pass_the_host_check(robust_echo, host):
    """Any printable Host value: served exactly when it names a loopback host (exact name, optional numeric port)."""
    resp = modern_call(robust_echo.url, "tools/list", headers={"Host": host})
    loopback = re.fullmatch(r"(?i)(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{0,5})?|::1", host) is not None
    assert resp.status == (200 if loopback else 421), f"Host {host!r}: {resp.status}"


# -- the bearer token --------------------------------------------------------------------------------------------------

def _auth(value: str) -> bytes:
    """Header values travel as bytes: the client sends UTF-8 (the server sees them latin-1 decoded, as WSGI says)."""
    return value.encode("utf-8")


@pytest.mark.parametrize("authorization", [
    None, "", "Bearer", "Bearer ", "Bearer wrong", "Basic " + TOKEN, TOKEN, "Bearer " + TOKEN[:-1],
    "Bearer " + TOKEN + "x",
    "Bearer " + TOKEN.upper(), "Bearer x" + TOKEN, "Bearer " + TOKEN[:1], "Bearer " + TOKEN + " " + TOKEN,
    "Bearer " + TOKEN.replace("\u00e9", "e"),
])
def test_wrong_or_missing_token_is_401(token_echo, authorization):
    headers = {"Authorization": _auth(authorization) if authorization is not None else None}
    resp = modern_call(token_echo.url, "tools/call",
                       {"name": "echo", "arguments": {"text": "x"}, "_meta": META}, headers)
    assert resp.status == 401, f"{authorization!r} -> {resp.status}"
    assert "bearer" in resp.text().lower() and resp.headers.get("www-authenticate", "").startswith("Bearer")
    assert TOKEN not in resp.text() and "echo=" not in resp.text()


@pytest.mark.parametrize("authorization",
                         ["Bearer " + TOKEN, "bearer " + TOKEN, "BEARER " + TOKEN, "Bearer  " + TOKEN + " "])
def test_right_token_is_served(token_echo, authorization):
    """The scheme is case-insensitive (RFC 9110 section 11.1); the token is compared as the bytes the client sent
    (UTF-8 here, so a non-ASCII token works)."""
    resp = modern_call(token_echo.url, "tools/call", {"name": "echo", "arguments": {"text": "x"}, "_meta": META},
                       {"Authorization": _auth(authorization)})
    assert resp.status == 200, f"{authorization!r} -> {resp.status} {resp.text()[:200]}"


def test_unauthenticated_requests_learn_nothing_and_open_no_session(token_echo):
    """Without the token: 401 before any parsing (no JSON-RPC detail, no tool names), and no session minted."""
    for body in ({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
                  "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}}, b"{not json"):
        resp = post_json(token_echo.url, body)
        assert resp.status == 401 and "mcp-session-id" not in resp.headers
        assert b"echo" not in resp.body and b"jsonrpc" not in resp.body


def test_token_checked_on_every_era_and_method(token_echo):
    for method in ("GET", "DELETE", "POST"):
        resp = post_json(token_echo.url, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                         {"Mcp-Session-Id": "0" * 32}, method=method)
        assert resp.status == 401, (method, resp.status)
    assert call_tool_raw(token_echo.url, "echo", {"text": "x"}).status == 401


# -- connection-level abuse --------------------------------------------------------------------------------------------

def test_expect_continue_without_body_stalls_only_itself(robust_echo):
    """waitress 3.0.2 never completes a request with `Expect: 100-continue` and an empty body (its send_continue
    marks the already complete request incomplete again; the connection then waits for channel_timeout).
    Upstream bug, not ours: what matters here is that such stalled connections hold no worker thread, so
    other clients are still served."""
    stalled = []
    raw = build_request("POST", "/mcp", "HTTP/1.1",
                        [("Host", host_of(robust_echo.url)), ("Content-Type", "application/json"),
                                                     ("Expect", "100-continue")], b"")
    host, port = host_of(robust_echo.url).rsplit(":", 1)
    for _ in range(40):  # more than the daemon's worker threads
        sock = socket.create_connection((host, int(port)), timeout=5)
        sock.sendall(raw)
        stalled.append(sock)
    try:  # (the call's own 20 s socket timeout is far below waitress's 120 s channel_timeout)
        resp = call_tool_raw(robust_echo.url, "echo", {"text": "through"})
        assert resp.status == 200 and b"through" in resp.body
    finally:
        for sock in stalled:
            sock.close()


def test_slow_header_clients_do_not_block_others(robust_echo):
    """Connections that send half a request and stop (slowloris) hold no worker thread either."""
    host, port = host_of(robust_echo.url).rsplit(":", 1)
    half_open = []
    for _ in range(40):
        sock = socket.create_connection((host, int(port)), timeout=5)
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{")
        half_open.append(sock)
    try:
        assert call_tool_raw(robust_echo.url, "echo", {"text": "ok"}).status == 200
    finally:
        for sock in half_open:
            sock.close()


# -- the real daemons use the same guard ---------------------------------------------------------------------------

@pytest.mark.slow
def test_bash_daemon_refuses_rebinding_and_requires_its_token(bash_factory, tmp_path):
    """The shipped daemon, not only the echo test server: a foreign Host/Origin and a missing or wrong token are
    refused before any tool runs; the right token runs the command."""
    token_file = tmp_path / "bash-token"
    token_file.write_text("bash-s3cret\n")
    token_file.chmod(0o600)
    daemon = bash_factory("--token-file", str(token_file), socket=False)
    marker = tmp_path / "ran"
    args = {"name": "guarded", "cmd": f"touch {marker}", "wait_seconds": 5}
    params = {"name": "run", "arguments": args, "_meta": META}
    good = {"Authorization": "Bearer bash-s3cret"}
    assert modern_call(daemon.url, "tools/call", params, {**good, "Host": "localhost.evil.example"}).status == 421
    assert modern_call(daemon.url, "tools/call", params, {**good, "Origin": "http://127.0.0.1.nip.io"}).status == 403
    assert modern_call(daemon.url, "tools/call", params).status == 401
    assert modern_call(daemon.url, "tools/call", params, {"Authorization": "Bearer bash-s3cre"}).status == 401
    assert not marker.exists() and not (daemon.state_dir / "bash-tasks" / "guarded.json").exists()
    resp = modern_call(daemon.url, "tools/call", params, good, timeout=60)
    assert resp.status == 200 and not resp.json()["result"]["isError"], resp.text()
    assert marker.exists()
