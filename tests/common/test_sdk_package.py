"""common/protocol/sdk_package.py: the SDK's `mcp_types` package with its models deferred. Each check runs in a
fresh interpreter, as a daemon starts (this process imported the whole package long ago)."""

import http.client
import json
import subprocess
import sys

import mcp_types._types as monolith
import mcp_types.jsonrpc as jsonrpc
import pytest
from kit.hivebash_testkit import wait_until

from common.protocol.sdk_package import GIVEN


def _fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_names_given_ahead_are_the_sdks_own():
    for module_name, module in (("mcp_types", monolith), ("mcp_types.jsonrpc", jsonrpc)):
        given = GIVEN[module_name]
        assert given == {name: getattr(module, name) for name in given}


def test_a_daemons_protocol_modules_need_no_model_until_a_version_is_refused():
    out = _fresh("""
import sys
import common.protocol.transport, common.protocol.mcp_tasks
from common.protocol import wire_types
print("mcp_types._types" in sys.modules or "pydantic" in sys.modules)
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
import mcp_types.jsonrpc
print(mcp_types.jsonrpc.JSONRPCRequest.__name__, "__getattr__" in vars(mcp_types.jsonrpc))
from mcp_types import *
print(CallToolResult is monolith.CallToolResult, "__getattr__" in vars(mcp_types))
import mcp.shared.inbound  # the SDK itself, on the package it finds
print(mcp.shared.inbound.UnsupportedProtocolVersionErrorData is monolith.UnsupportedProtocolVersionErrorData)
""")
    assert out.splitlines() == ["False", "True True", "AttributeError module 'mcp_types' has no attribute 'NoSuchName'",
                                "JSONRPCRequest False", "True False", "True"], out


MODERN_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "list", "arguments": {}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                               "io.modelcontextprotocol/clientCapabilities": {}}}}
MODERN_HEADERS = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "list"}
HANDSHAKE = {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


@pytest.mark.parametrize("era, loaded", [("modern", "models False pydantic False"),
                                         ("handshake", "models False pydantic True")])
def test_a_daemons_first_call_imports_no_model_it_does_not_use(tmp_path, era, loaded):
    ready = tmp_path / "ready.json"
    code = ("import atexit, sys; atexit.register(lambda: print('models', 'mcp_types._types' in sys.modules, "
            "'pydantic', 'pydantic' in sys.modules)); from hivebash.cli import daemon_main; daemon_main()")
    daemon = subprocess.Popen([sys.executable, "-c", code, "--state-dir", str(tmp_path / "state"), "--port", "0",
                               "--ready-file", str(ready)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    try:
        wait_until(ready.exists, 30, "the daemon's ready file")
        port = int(json.loads(ready.read_text())["url"].rsplit(":", 1)[1].split("/")[0])
        if era == "modern":
            assert "result" in (answer := _post(port, MODERN_CALL, MODERN_HEADERS)), answer
        else:
            answer = _post(port, HANDSHAKE, {})
            assert answer["result"]["protocolVersion"] == "2025-11-25", answer
    finally:
        daemon.terminate()
        out, _ = daemon.communicate(timeout=30)
    assert out.strip().endswith(loaded), out


def _post(port: int, body: dict, headers: dict) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/mcp", body=json.dumps(body), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    response = conn.getresponse()
    return json.loads(response.read())
