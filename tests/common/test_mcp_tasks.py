"""The tasks extension's shared wire (common/protocol/mcp_tasks.py): handles, shapes, and a server without handles.
The rules over a daemon's real tasks are tests/bash/test_mcp_tasks*.py."""

import re

import pytest
from raw_mcp import META, modern

from common.protocol.mcp_tasks import (
    AGENT_TASK_META,
    TASKS_EXTENSION,
    TaskState,
    create_task_result,
    declares_tasks,
    handle_prefix,
    iso_time,
    new_handle,
    same_handle,
)

TASKS_META = dict(META, **{"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})


def test_a_handle_begins_with_its_id_and_carries_128_secret_bits():
    handle = new_handle("build-7")
    assert re.fullmatch(r"build-7-[0-9a-f]{32}", handle) and handle_prefix(handle) == "build-7"
    assert new_handle("build-7") != handle
    assert handle_prefix("build-7") is None and handle_prefix("-" + "a" * 32) is None
    assert same_handle(handle, handle) and not same_handle(handle, handle[:-1] + "x") and not same_handle(None, handle)
    longest = new_handle("a" * 95)
    assert len(longest) == 128 and all("\x21" <= c <= "\x7e" for c in longest)
    for bad in ("", "a" * 96, "has space", "é"):
        with pytest.raises(ValueError, match="prefix"):
            new_handle(bad)


def test_declaring_the_extension_is_read_from_the_request_meta_only():
    assert declares_tasks({"_meta": TASKS_META})
    assert not declares_tasks({"_meta": META})
    for params in (None, [], {"_meta": None}, {"_meta": {"io.modelcontextprotocol/clientCapabilities": []}},
                   {"_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": [TASKS_EXTENSION]}}}):
        assert not declares_tasks(params)


def test_create_task_result_is_flat_with_integer_milliseconds_and_no_result():
    state = TaskState("working", 1700000000.25, 1700000001.5, ttl_ms=3_600_000, poll_interval_ms=1000,
                      status_message="running 1 s", result={"content": [], "isError": False})
    body = create_task_result("abc-" + "0" * 32, state, immediate="bash task abc is running")
    assert body["resultType"] == "task" and body["status"] == "working" and body["taskId"].startswith("abc-")
    assert body["createdAt"] == "2023-11-14T22:13:20.250Z" and body["lastUpdatedAt"] == "2023-11-14T22:13:21.500Z"
    assert type(body["ttlMs"]) is int and type(body["pollIntervalMs"]) is int
    assert not {"result", "error", "task", "ttl", "pollInterval", "requestState"} & body.keys()
    assert body["_meta"] == {AGENT_TASK_META: {"modelImmediateResponse": "bash task abc is running"}}
    assert iso_time(0.9999) == "1970-01-01T00:00:00.999Z"


def test_a_server_without_task_handles_offers_no_tasks(echo_daemon):
    """The extension is served only by a daemon that has tasks to show: elsewhere every tasks/* is unknown and
    server/discover does not advertise it; a tools/call declaring it answers as always."""
    _, body = modern(echo_daemon.url, "server/discover", {"_meta": TASKS_META})
    assert "extensions" not in body["result"]["capabilities"]
    for method in ("tasks/get", "tasks/cancel", "tasks/update", "tasks/list", "tasks/result"):
        _, body = modern(echo_daemon.url, method, {"taskId": "x", "_meta": TASKS_META}, headers={"Mcp-Name": "x"})
        assert body["error"]["code"] == -32601, method
    _, body = modern(echo_daemon.url, "tools/call", {"name": "echo", "arguments": {"text": "hi"}, "_meta": TASKS_META})
    assert body["result"]["content"] == [{"type": "text", "text": "echo=hi"}]
