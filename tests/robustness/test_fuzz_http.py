"""Property-based fuzzing of the MCP transport over raw HTTP (hypothesis), against a real daemon process.

Whatever arrives — any method, target, HTTP version, header value (latin-1 bytes included), body (random JSON,
JSON-RPC-ish shapes, invalid UTF-8, deep nesting, huge numbers, batches) — the daemon answers, never with a
5xx, stays alive, names the problem in every 4xx, and gives every JSON-RPC error a code and a message.
The session fixture also checks at teardown that nothing was logged as an unexpected server error.
"""

import json

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kit.fuzz_budget import examples
from kit.robust_kit import (
    META,
    MODERN,
    assert_well_formed_answer,
    build_request,
    call_tool_raw,
    exchange,
    host_of,
    post_json,
    tool_result,
)

FUZZ = settings(max_examples=examples(150), deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

# -- JSON and JSON-RPC-ish shapes ---------------------------------------------------------------------------------

json_leaf = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(10**40), max_value=10**40)
             | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=30))
json_value = st.recursive(
    json_leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=15)
# block/unblock hold a request thread for seconds by design; everything else is fair game.
tool_names = (st.sampled_from(["echo", "echo", "refuse", "crash", "nope", "", "ECHO", "echo\x00"])
              | st.text(max_size=12).filter(lambda s: s not in ("block", "unblock")))
methods = st.sampled_from(["tools/call", "tools/call", "tools/list", "server/discover", "initialize", "ping",
                           "notifications/initialized", "resources/list", "", "tools/call/x"]) | st.text(max_size=16)
ids = (st.integers() | st.text(max_size=10)
       | st.sampled_from([None, 1.5, True, [], {}, 10**30, -1, "server-discover-probe-1"]))
versions = (st.sampled_from([MODERN, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
                             "2099-01-01", "", "latest"])
            | st.text(max_size=12))
echo_args = st.fixed_dictionaries({}, optional={
    "text": st.text(max_size=40) | json_value | st.just("x" * 1001),
    "times": st.integers(min_value=-3, max_value=8) | st.floats() | st.sampled_from([2.0, True, "2", None, 10**20]),
    "extra": json_value,
})
metas = (st.sampled_from([META, dict(META, **{"hive/structured": True}), {}, None, [], {"hive/structured": "yes"}])
         | st.fixed_dictionaries({}, optional={"io.modelcontextprotocol/protocolVersion": versions,
                                               "io.modelcontextprotocol/clientCapabilities": json_value,
                                               "hive/structured": json_value}))
params = json_value | st.fixed_dictionaries({}, optional={
    "name": tool_names, "arguments": echo_args | json_value, "_meta": metas, "cursor": json_value,
    "protocolVersion": versions, "capabilities": json_value,
    "clientInfo": json_value | st.just({"name": "f", "version": "1"}),
})
rpc_message = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2.0, None]), "id": ids, "method": methods, "params": params,
    "result": json_value, "error": json_value,
})


def _dumps(value) -> bytes:
    return json.dumps(value).encode()


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


bodies = st.one_of(
    rpc_message.map(_dumps),
    st.lists(rpc_message, max_size=4).map(_dumps),  # batches (and the empty batch)
    json_value.map(_dumps),
    st.binary(max_size=200),
    st.builds(lambda bad, m: _dumps(m).replace(b'"2.0"', b'"2.0' + bad + b'"', 1),
              st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80abc", b"\\ud800"]), rpc_message),
    st.integers(min_value=1, max_value=3000).map(_nested),
    st.integers(min_value=1, max_value=3000).map(
        lambda d: (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":'
                   + _nested(d) + b"}}}")),
    st.integers(min_value=1, max_value=6000).map(lambda n: b"1" * n),
    st.sampled_from([b"1e999", b"-1e999", b"NaN", b"Infinity", b"-0", b"", b" ", b"null", b"{}", b"[]",
                     b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}']),
)

# -- HTTP framing and headers ---------------------------------------------------------------------------------------

# Raw header bytes (latin-1 and invalid UTF-8 included); CR and LF would end the header, so they are left out.
header_text = st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
http_methods = (st.sampled_from(["POST"] * 6 + ["GET", "DELETE", "HEAD", "PUT", "OPTIONS", "PATCH", "TRACE", "post"])
                | st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ-!#$%&'*+.^_`|~", min_size=1, max_size=10))
targets = (st.sampled_from(["/mcp"] * 6 + ["/healthz", "/", "/mcp/", "/MCP", "/mcp?x=1", "//mcp", "/mcp%00", "/../mcp",
                                           "/%ff", "*", "http://127.0.0.1/mcp", "/mcp;x", "/healthz/../mcp"])
           | st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=20).map(lambda s: "/" + s))
http_versions = st.sampled_from(["HTTP/1.1"] * 6
                                + ["HTTP/1.0", "HTTP/0.9", "HTTP/2.0", "HTTP/1.2", "HTTP/9.9", "http/1.1"])
hosts = st.sampled_from(["<self>"] * 6 + [None, "", "localhost", "[::1]", "evil.example", "localhost.evil.example",
                                         "127.0.0.1.nip.io", "[::1", "::1", "127.0.0.1:99999",
                                         "LOCALHOST:1"]) | header_text
content_types = st.sampled_from(["application/json"] * 4 + ["application/json; charset=utf-8", "APPLICATION/JSON",
                                                           "text/plain", "application/json-rpc", "",
                                                           "multipart/form-data; boundary=x"]) | header_text
accepts = (st.sampled_from(["application/json, text/event-stream"] * 3
                           + ["*/*", "text/event-stream", "text/html", "", "application/*;q=0"])
           | header_text)
optional_headers = st.fixed_dictionaries({}, optional={
    "Origin": st.sampled_from(["http://localhost:3000", "http://evil.example", "null", "http://localhost.evil.example",
                               "http://[::1]:1", "file://", "http://127.0.0.1.nip.io"]) | header_text,
    "MCP-Protocol-Version": versions.filter(lambda v: "\r" not in v and "\n" not in v) | header_text,
    "Mcp-Method": methods.filter(lambda v: "\r" not in v and "\n" not in v) | header_text,
    "Mcp-Name": tool_names.filter(lambda v: "\r" not in v and "\n" not in v) | header_text,
    # (str values go out UTF-8 encoded, as a client would send them; the server reads headers as latin-1)
    "Mcp-Session-Id": st.sampled_from(["0" * 32, "x", ""]) | header_text,
    "Authorization": st.sampled_from(["Bearer x", "Bearer ", "Basic Zm9vOmJhcg==", "bearer x"]) | header_text,
    "Transfer-Encoding": st.sampled_from(["chunked", "gzip", "identity"]),
    "Content-Encoding": st.sampled_from(["gzip", "br"]),
    # Expect is kept only with a body: see test_expect_continue_without_body_stalls_only_itself.
    "Expect": st.just("100-continue"),
})


@st.composite
def http_requests(draw, url):
    method = draw(http_methods)
    host = draw(hosts)
    headers: list[tuple[str, str | bytes]] = []
    if host is not None:
        headers.append(("Host", host_of(url) if host == "<self>" else host))
    headers.append(("Content-Type", draw(content_types)))
    headers.append(("Accept", draw(accepts)))
    headers += [(k, v.encode("utf-8") if isinstance(v, str) else v) for k, v in draw(optional_headers).items()]
    if draw(st.booleans()):  # a routing header sent twice
        headers.append(("Mcp-Method", draw(methods.filter(lambda v: "\r" not in v and "\n" not in v))))
    body = draw(bodies)
    if not body:
        headers = [(k, v) for k, v in headers if k != "Expect"]
    if ("Transfer-Encoding", b"chunked") in headers:
        body = f"{len(body):x}".encode() + b"\r\n" + body + b"\r\n0\r\n\r\n" if body else b"0\r\n\r\n"
    return method, build_request(method, draw(targets), draw(http_versions), headers, body)


@FUZZ
@given(data=st.data())
def test_any_request_gets_an_answer_that_is_not_a_server_error(robust_echo, data):
    method, raw = data.draw(http_requests(robust_echo.url), label="request")
    resp = exchange(robust_echo.url, raw, method, timeout=10)
    event(f"status {resp.status}")
    assert_well_formed_answer(resp, method, raw)
    assert robust_echo.proc.poll() is None, f"the daemon died:\n{robust_echo.log()[-3000:]}"


ascii_tool_names = (st.sampled_from(["echo"] * 6 + ["refuse", "crash", "nope", "", "ECHO"])
                    | st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126),
                              max_size=12).filter(lambda s: s not in ("block", "unblock")))


@st.composite
def modern_requests(draw):
    """Mostly well-framed 2026-07-28 requests whose headers agree with the body, so the fuzzing reaches the
    JSON-RPC dispatch and the tools rather than stopping at the first header check."""
    message = draw(rpc_message)
    if draw(st.integers(0, 9)):  # nine in ten: a well-formed envelope around fuzzed params and arguments
        message.update(jsonrpc="2.0", id=draw(st.integers(0, 10**6) | st.text(max_size=8)))
        message["method"] = draw(st.sampled_from(["tools/call"] * 8
                                                 + ["tools/list", "server/discover", "ping", "initialize"]))
        if not isinstance(message.get("params"), dict) or draw(st.integers(0, 3)):
            message["params"] = {"name": draw(ascii_tool_names), "arguments": draw(echo_args | json_value)}
        message["params"].setdefault("_meta", dict(META, **{"hive/structured": draw(st.booleans())}))
    headers: dict[str, str | None] = {"MCP-Protocol-Version": MODERN}
    method = message.get("method")
    if isinstance(method, str) and draw(st.integers(0, 19)):
        headers["Mcp-Method"] = method
    name = message.get("params", {}).get("name") if isinstance(message.get("params"), dict) else None
    if isinstance(name, str) and draw(st.integers(0, 19)):
        headers["Mcp-Name"] = name
    headers = {k: v for k, v in headers.items() if v is None or ("\r" not in v and "\n" not in v)}
    return message, headers


@FUZZ
@given(request=modern_requests())
def test_modern_requests_reach_dispatch_and_never_fail_the_server(robust_echo, request):
    message, headers = request
    resp = post_json(robust_echo.url, message, headers)
    event(f"status {resp.status}: {resp.text()[:160] if resp.status != 200 else resp.text()[-100:]}")
    assert_well_formed_answer(resp)
    if resp.status == 200 and isinstance(resp.json(), dict) and "result" in resp.json():
        result = resp.json()["result"]
        assert result.get("resultType") == "complete", result
        if message.get("method") == "tools/call":
            text = "".join(c.get("text", "") for c in result["content"])
            assert text.strip(), f"a tool result must say something: {result}"
            if result["isError"] and "invalid arguments" in text:
                assert any(f in text for f in ("text", "times", "arguments")), (
                    f"the refusal must name the field: {text}")
    assert robust_echo.proc.poll() is None, f"the daemon died:\n{robust_echo.log()[-3000:]}"


@FUZZ
@given(message=rpc_message | st.lists(rpc_message, max_size=4),
       version=st.sampled_from([None, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]))
def test_handshake_session_messages_never_fail_the_server(robust_echo, handshake_session, message, version):
    headers = {"Mcp-Session-Id": handshake_session, "MCP-Protocol-Version": version}
    resp = post_json(robust_echo.url, message, headers)
    event(f"status {resp.status}")
    assert_well_formed_answer(resp)
    assert resp.status != 404, "the session must stay known while it is in use"
    assert robust_echo.proc.poll() is None


def test_fuzzing_left_the_daemon_serving(robust_echo):
    """After all of the above, a plain healthz and a plain tool call still work."""
    resp = exchange(robust_echo.url,
                    build_request("GET", "/healthz", "HTTP/1.1", [("Host", host_of(robust_echo.url))], None), "GET")
    assert resp.status == 200 and resp.json()["ok"] is True
    still = tool_result(call_tool_raw(robust_echo.url, "echo", {"text": "still"}))
    assert still["structuredContent"] == {"echo": "still"}
