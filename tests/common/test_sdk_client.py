"""The official Python SDK client (mcp 2.3) against our transport, in each of its connect modes."""

import anyio
import pytest
from mcp.client.client import Client


async def _session(url, mode):
    async with Client(url, mode=mode) as client:
        tools = await client.list_tools()
        ok = await client.call_tool("echo", {"text": "hi", "times": 3})
        bad = await client.call_tool("echo", {"text": 1})
        unknown_error = None
        try:
            await client.call_tool("no-such-tool", {})
        except Exception as exc:  # noqa: BLE001 - the SDK raises MCPError for a JSON-RPC error
            unknown_error = exc
        return client.protocol_version, tools, ok, bad, unknown_error


@pytest.mark.parametrize("mode,version",
                         [("auto", "2026-07-28"), ("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")])
def test_official_python_client(echo_daemon, mode, version):
    negotiated, tools, ok, bad, unknown_error = anyio.run(_session, echo_daemon.url, mode)
    assert negotiated == version
    assert [t.name for t in tools.tools] == ["echo", "refuse", "crash", "block", "unblock", "tick", "hold", "holds"]
    assert tools.tools[0].input_schema["required"] == ["text"]
    assert ok.is_error is False and ok.content[0].text == "echo=hihihi"
    assert ok.structured_content is None
    assert bad.is_error is True and "text: must be of type string" in bad.content[0].text
    assert unknown_error is not None and "no-such-tool" in str(unknown_error)
