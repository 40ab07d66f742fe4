"""A raw 2026-07-28 client of the MCP tasks extension (tests/raw_mcp.py's requests): a request that declares it,
`tasks/*` with their Mcp-Name header, and the wait for a handle's end."""

import re

from daemon_harness import wait_until
from raw_mcp import META, modern

from common.protocol.mcp_tasks import TASKS_EXTENSION

TASKS_META = dict(META, **{"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})
HANDLE = re.compile(r"^(?P<id>[a-z0-9-]+)-[0-9a-f]{32}$")


def call(url, tool, arguments, tasks=True):
    """A tools/call's result, the request declaring the extension (`tasks`) or not."""
    _, body = modern(url, "tools/call", {"name": tool, "arguments": arguments, "_meta": TASKS_META if tasks else META})
    return body["result"]


def run(url, cmd, tasks=True, **args):
    return call(url, "run", {"cmd": cmd, **args}, tasks)


def task_rpc(url, method, handle, tasks=True, name="same", **params):
    headers = {"Mcp-Name": handle if name == "same" else name}
    return modern(url, method, {"taskId": handle, "_meta": TASKS_META if tasks else META, **params}, headers=headers)


def get(url, handle):
    resp, body = task_rpc(url, "tasks/get", handle)
    assert resp.status == 200, body
    return body["result"]


def ended(url, handle, timeout=20):
    return wait_until(lambda: (r := get(url, handle))["status"] != "working" and r, timeout, "the task's end")
