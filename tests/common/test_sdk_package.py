"""common/protocol/sdk_package.py: the SDK's `mcp_types` package with its monolith deferred. Each check runs in a
fresh interpreter, as a daemon starts (this process imported the whole package long ago)."""

import http.client
import json
import subprocess
import sys

import mcp_types._types as monolith
from kit.hivebash_testkit import wait_until

from common.protocol.sdk_package import RESERVED_KEYS


def _fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_names_given_ahead_are_the_sdks_own():
    assert RESERVED_KEYS == {name: getattr(monolith, name) for name in RESERVED_KEYS}


def test_a_daemons_protocol_modules_need_no_monolith_until_a_version_is_refused():
    out = _fresh("""
import sys
import common.protocol.transport, common.protocol.mcp_tasks
from common.protocol import wire_types
print("mcp_types._types" in sys.modules)
rejection = wire_types.unsupported_protocol_version_rejection("1999-01-01", ["2026-07-28"])
print(rejection.data, "mcp_types._types" in sys.modules)
""")
    # the refusal's error data is the SDK's model, imported at that first refusal
    assert out.splitlines() == ["False", "{'supported': ['2026-07-28'], 'requested': '1999-01-01'} True"], out


def test_the_first_name_asked_for_makes_it_the_sdks_package():
    out = _fresh("""
import sys
import common.protocol
import mcp_types
print("mcp_types._types" in sys.modules)
import mcp_types._types as monolith
print(mcp_types.CallToolResult is monolith.CallToolResult, "InitializeRequestParams" in mcp_types.__all__)
try:
    mcp_types.NoSuchName
except AttributeError as exc:
    print("AttributeError", exc)
from mcp_types import *
print(CallToolResult is monolith.CallToolResult, "__getattr__" in vars(mcp_types))
import mcp.shared.inbound  # the SDK itself, on the package it finds
print(mcp.shared.inbound.UnsupportedProtocolVersionErrorData is monolith.UnsupportedProtocolVersionErrorData)
""")
    assert out.splitlines() == ["False", "True True", "AttributeError module 'mcp_types' has no attribute 'NoSuchName'",
                                "True False", "True"], out


def test_a_daemon_answers_its_first_calls_of_either_era_without_the_monolith(tmp_path):
    ready = tmp_path / "ready.json"
    code = ("import atexit, sys; atexit.register(lambda: print('monolith', 'mcp_types._types' in sys.modules)); "
            "from hivebash.cli import daemon_main; daemon_main()")
    daemon = subprocess.Popen([sys.executable, "-c", code, "--state-dir", str(tmp_path / "state"), "--port", "0",
                               "--ready-file", str(ready)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    try:
        wait_until(ready.exists, 30, "the daemon's ready file")
        port = int(json.loads(ready.read_text())["url"].rsplit(":", 1)[1].split("/")[0])
        modern = _post(port, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "list", "arguments": {}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                                       "io.modelcontextprotocol/clientCapabilities": {}}}},
                       {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "list"})
        assert "result" in modern, modern
        handshake = _post(port, {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}, {})
        assert handshake["result"]["protocolVersion"] == "2025-11-25", handshake
    finally:
        daemon.terminate()
        out, _ = daemon.communicate(timeout=30)
    assert out.strip().endswith("monolith False"), out


def _post(port: int, body: dict, headers: dict) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/mcp", body=json.dumps(body), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    response = conn.getresponse()
    return json.loads(response.read())
