"""Issue 27 point 9: a `run` whose `cmd` makes the request body larger than the 1 MiB limit is answered as a tool
error the model can act on (naming cmd, its size, both limits and what to do), in both protocol eras, through the
official Python SDK client and raw HTTP against a real hive-bash-daemon. Other methods that large, and any body
over the ceiling (8 MiB), still get HTTP 413. The advice is each tool's own: on the subagent daemon a long prompt
goes in a file the prompt names, not a bash script."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest
from kit.sdk_agent import SdkAgent, socketless_bash_daemon
from mcp.client.client import Client
from raw_mcp import META, MODERN, initialize, legacy, modern, post

BIG_CMD = "echo " + "x" * (2 * 1024 * 1024)  # 2 MiB: over the request limit, under the ceiling


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    with socketless_bash_daemon(tmp_path_factory.mktemp("oversized")) as d:
        yield d


def _assert_names_cmd(text: str) -> None:
    assert text.startswith("invalid arguments for run: cmd: is 2,097,157 bytes"), text
    assert "1,048,576-byte (1 MiB) request limit" in text and "65,536 bytes of UTF-8" in text, text
    assert "Nothing was run: write the long part to a file and run it by its path" in text, text
    assert "bash /path/to/script.sh" in text, text
    assert len(text.encode()) < 1024, "a short answer, not an echo of the argument"


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # auto negotiates 2026-07-28
def test_sdk_client_gets_a_tool_error_naming_cmd(daemon, mode):
    agent = SdkAgent(daemon.url, mode=mode)
    try:
        _assert_names_cmd(agent.call("run", error=True, cmd=BIG_CMD))
        assert "hello" in agent.call("run", cmd="echo hello"), "the connection still serves calls"
        listing = agent.call("list")
        assert "echo hello" in listing and "xxxxxxxx" not in listing, "the big cmd was never run"
    finally:
        agent.close()


async def _sdk_call_over_the_ceiling(url: str) -> str:
    try:
        async with Client(url, mode="2026-07-28") as client:
            await client.call_tool("run", {"cmd": "echo " + "x" * (10 * 1024 * 1024)})
    except BaseException as exc:  # noqa: BLE001 - an ExceptionGroup from the client's task group
        return repr(exc)
    return "answered"


def test_sdk_client_over_the_ceiling_is_an_http_error(daemon):
    """The 413 comes on the declared length, while the client is still sending: it sees the 413 or the
    connection's close (HTTP's reality; the raw test below reads the status itself), never a tool result."""
    outcome = anyio.run(_sdk_call_over_the_ceiling, daemon.url)
    assert outcome != "answered" and ("413" in outcome or "ReadError" in outcome or "WriteError" in outcome), outcome


def test_raw_modern_tool_error(daemon):
    resp, body = modern(daemon.url, "tools/call", {"name": "run", "arguments": {"cmd": BIG_CMD}})
    assert resp.status == 200, body
    result = body["result"]
    assert result["isError"] is True and result["resultType"] == "complete"
    _assert_names_cmd(result["content"][0]["text"])


def test_raw_handshake_tool_error_keeps_the_session_checks(daemon):
    call = {"name": "run", "arguments": {"cmd": BIG_CMD}}
    session, _ = initialize(daemon.url)
    resp, body = legacy(daemon.url, session, "tools/call", call)
    assert resp.status == 200 and body["result"]["isError"] is True, body
    _assert_names_cmd(body["result"]["content"][0]["text"])
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
    resp, body = post(daemon.url, message, {"MCP-Protocol-Version": "2025-11-25"})
    assert resp.status == 400 and "Mcp-Session-Id" in body, "no session: refused as any call is"


def test_a_send_that_large_is_told_to_redirect_a_file(daemon):
    resp, body = modern(daemon.url, "tools/call",
                        {"name": "send", "arguments": {"id": "t1", "text": "x" * (2 * 1024 * 1024)}})
    text = body["result"]["content"][0]["text"]
    assert body["result"]["isError"] is True and text.startswith(
        "invalid arguments for send: text: is 2,097,152 bytes"), text
    assert "Nothing was run: write the long part to a file and redirect it into a task's input at its run" in text, text


def test_unknown_tool_that_large_is_the_usual_unknown_tool_error(daemon):
    resp, body = modern(daemon.url, "tools/call", {"name": "nope", "arguments": {"cmd": BIG_CMD}},
                        headers={"Mcp-Name": "nope"})
    assert "Unknown tool: nope" in body["error"]["message"], body


@pytest.mark.parametrize("era", ["modern", "handshake"])
def test_other_methods_that_large_are_413(daemon, era):
    params = {"cursor": "x" * (2 * 1024 * 1024)}
    if era == "modern":
        resp, body = modern(daemon.url, "tools/list", dict(params, _meta=META))
    else:
        session, _ = initialize(daemon.url)
        resp, body = legacy(daemon.url, session, "tools/list", params)
    assert resp.status == 413 and "limit 1048576 bytes" in body, body
    resp, body = post(daemon.url, b"{" * (2 * 1024 * 1024),
                      {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call"})
    assert resp.status == 413, "not JSON, so not a tools/call"
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "run", "arguments": {"cmd": BIG_CMD}}}]
    resp, body = post(daemon.url, json.dumps(batch), {"MCP-Protocol-Version": MODERN})
    assert resp.status == 413, "a batch is not one tools/call"


@pytest.mark.parametrize("headers",
                         [f"MCP-Protocol-Version: {MODERN}\r\nMcp-Method: tools/call\r\nMcp-Name: run\r\n", ""])
def test_over_the_ceiling_is_413_before_the_body(daemon, headers):
    """10 MB declared: refused on its length (a raw socket, as tests/common/test_transport_http.py explains)."""
    parts = urlsplit(daemon.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{headers}"
                     f"Content-Length: {10 * 1024 * 1024}\r\n\r\n{{\"jsonrpc\":\"2.0\",".encode())
        reply = b""
        while b"\r\n\r\n" not in reply and (chunk := sock.recv(4096)):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]


@pytest.mark.parametrize("tool,arguments,advice", [
    ("continue", {"name": "job", "prompt": "x" * (2 * 1024 * 1024)},
     "write the long part to a file and give a short prompt that names its absolute path (the subagent reads it"),
    ("start", {"name": "job", "prompt_file": "/nowhere.md", "trigger": "x" * (2 * 1024 * 1024)},
     "write the long part to a file and pass it by path: the instructions as prompt_file; a long first prompt as a "
     "short trigger that names the file's absolute path"),
])
def test_the_subagent_daemon_advises_its_own_way_to_pass_a_long_prompt(daemon_factory, tmp_path, tool,
                                                                       arguments, advice):
    """No claude runs: the call is refused before its handler (so any claude_bin will do)."""
    argv = [str(Path(sys.executable).parent / "hive-subagent-daemon"), "--claude-bin", "true", "--workdir",
            str(tmp_path), "--state-dir", str(tmp_path / "state")]
    url = daemon_factory(argv).url
    resp, body = modern(url, "tools/call", {"name": tool, "arguments": arguments})
    assert resp.status == 200 and body["result"]["isError"] is True, body
    text = body["result"]["content"][0]["text"]
    big = "prompt" if tool == "continue" else "trigger"
    assert text.startswith(f"invalid arguments for {tool}: {big}: is 2,097,152 bytes"), text
    assert "1,000,000 characters" in text and f"Nothing was run: {advice}" in text, text
    assert "bash" not in text and "script" not in text and len(text.encode()) < 1024, text
