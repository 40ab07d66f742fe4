"""The official TypeScript SDK client (@modelcontextprotocol/sdk 1.32.2, run with node) against our transport.

The SDK speaks the handshake era only: initialize, notifications/initialized, a GET for a server stream
(which we answer 405, as every client accepts), then requests on the session, and DELETE on terminateSession().
ts_client.mjs records every HTTP exchange and prints what the client saw as one JSON object.
"""

import http.client
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def ts_run(echo_daemon, node22, ts_sdk_modules):
    proc = subprocess.run([str(node22), str(HERE / "ts_client.mjs"), echo_daemon.url, str(ts_sdk_modules)],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (
        f"ts_client.mjs failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}\n{echo_daemon.log()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_ts_client_connects_and_lists_tools(ts_run):
    assert ts_run["sdkVersion"] == "1.32.2"
    assert ts_run["protocolVersion"] == "2025-11-25"
    assert ts_run["serverInfo"] == {"name": "echo-test", "version": "0.1.0"}
    assert ts_run["capabilities"] == {"tools": {"listChanged": False}}
    assert [t["name"] for t in ts_run["tools"]] == [
        "echo", "refuse", "crash", "block", "unblock", "tick", "hold", "holds"]
    assert ts_run["tools"][0]["inputSchema"]["required"] == ["text"]
    assert ts_run["errors"] == [], "the SDK reported transport errors"


def test_ts_client_tool_results(ts_run):
    assert ts_run["echo"] == {"content": [{"type": "text", "text": "echo=hihi"}], "isError": False}
    assert ts_run["refuse"]["isError"] is True and "always refuses" in ts_run["refuse"]["content"][0]["text"]
    assert ts_run["badArgs"]["isError"] is True
    assert "text: must be of type string" in ts_run["badArgs"]["content"][0]["text"]
    error = ts_run["unknown"].get("error")
    assert error is not None, f"an unknown tool must be a JSON-RPC error, got {ts_run['unknown']}"
    assert error["name"] == "McpError" and error["code"] == -32602 and "no-such-tool" in error["message"]


def test_ts_client_http_exchanges(ts_run):
    """Every exchange the SDK made got the status the spec gives it, and DELETE really ended the session."""
    seen = [(h["method"], h["rpc"], h["status"]) for h in ts_run["http"]]
    assert seen[:2] == [("POST", "initialize", 200), ("POST", "notifications/initialized", 202)], seen
    assert ("GET", None, 405) in seen, "the SDK asks for a server stream; we offer none (405)"
    assert seen[-1] == ("DELETE", None, 204), seen
    assert all(status < 300 for method, _, status in seen if method != "GET"), seen
    after_init = [h for h in ts_run["http"] if h["rpc"] != "initialize"]
    assert all(h["protocolVersion"] == "2025-11-25" for h in after_init), after_init
    assert ts_run["sessionId"] and ts_run["sessionIdAfterTerminate"] is None


def test_ts_client_terminated_session_is_gone(ts_run, echo_daemon):
    parts = urlsplit(echo_daemon.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request("POST", parts.path, body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
                 headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                          "Mcp-Session-Id": ts_run["sessionId"], "MCP-Protocol-Version": "2025-11-25"})
    status = conn.getresponse().status
    conn.close()
    assert status == 404, "the session the SDK ended with DELETE must be unknown afterwards"


BASH_DAEMON = str(Path(sys.executable).parent / "hive-bash-daemon")


def test_ts_client_onprogress_and_cancel(daemon_factory, tmp_path, node22, ts_sdk_modules):
    """onprogress gets the task's lines during a 3 s wait; an aborted call frees the one wait slot at once."""
    daemon = daemon_factory([BASH_DAEMON, "--state-dir", str(tmp_path / "state"), "--max-inline-waits", "1"])
    proc = subprocess.run([str(node22), str(HERE / "ts_progress.mjs"), daemon.url, str(ts_sdk_modules)],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (
        f"ts_progress.mjs failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}\n{daemon.log()[-2000:]}")
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    messages = [p["message"] for p in seen["progress"]]
    assert any('last: "step' in m for m in messages), messages
    assert all(p["total"] == 3 for p in seen["progress"]), seen["progress"]
    assert "task started" in seen["result"]["content"][0]["text"]
    assert seen["cancelled"] and "enough" in seen["cancelled"], seen
    again = seen["again"]["content"][0]["text"]
    assert "second" in again and "busy" not in again, again
