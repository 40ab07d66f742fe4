"""Declaring and calling tools: every validation message names the field and the rule; failures never escape."""

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema.exceptions import SchemaError

from common.protocol.argument_errors import ToolArgumentsError
from common.protocol.argument_schema import validate_arguments
from common.protocol.tools import (
    CallContext,
    Tool,
    ToolError,
    ToolRegistry,
    ToolResult,
    UnknownTool,
    closed_object,
)

REPO = Path(__file__).resolve().parents[2]
SCHEMA = {
    "type": "object",
    "properties": {
        "cmd": {"type": "string", "minLength": 1, "maxLength": 10},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 60},
        "count": {"type": "integer", "minimum": 1},
        "name": {"type": "string", "pattern": "^[a-z]+$"},
        "signal": {"enum": ["TERM", "KILL"]},
        "limit": {"type": ["integer", "null"]},
        "opts": {"type": "object", "properties": {"depth": {"type": "integer", "minimum": 0}}, "required": ["depth"]},
    },
    "required": ["cmd"],
    "additionalProperties": False,
}


def message_for(arguments):
    with pytest.raises(ToolArgumentsError) as info:
        validate_arguments(SCHEMA, arguments)
    return str(info.value)


@pytest.mark.parametrize("arguments,expected", [
    ({}, "cmd: is required"),
    ({"cmd": 5}, "cmd: must be of type string"),
    ({"cmd": ""}, "cmd: must be at least 1 characters"),
    ({"cmd": "x" * 11}, "cmd: must be at most 10 characters"),
    ({"cmd": "ls", "timeout": 0}, "timeout: must be > 0"),
    ({"cmd": "ls", "timeout": 61}, "timeout: must be <= 60"),
    ({"cmd": "ls", "count": 0}, "count: must be >= 1"),
    ({"cmd": "ls", "count": 1.5}, "count: must be of type integer"),
    ({"cmd": "ls", "name": "A"}, "name: must match ^[a-z]+$"),
    ({"cmd": "ls", "signal": "HUP"}, "signal: must be one of 'TERM', 'KILL'"),
    ({"cmd": "ls", "limit": "5"}, "limit: must be of type integer or null"),
    ({"cmd": "ls", "opts": {}}, "opts.depth: is required"),
    ({"cmd": "ls", "opts": {"depth": -1}}, "opts.depth: must be >= 0"),
])
def test_each_rule_names_the_field(arguments, expected):
    assert message_for(arguments) == expected


def test_unknown_argument_is_named_with_the_nearest_known_one():
    message = message_for({"cmd": "ls", "timout": 3})
    assert message.startswith("arguments: unknown argument(s) not allowed: 'timout' (did you mean 'timeout'?)"), message
    assert message.endswith("; the known ones: " + ", ".join(SCHEMA["properties"]))
    assert message_for({"cmd": "ls", "zzz": 1}).startswith(
        "arguments: unknown argument(s) not allowed: 'zzz'; the known")


def test_a_tool_can_say_what_an_unknown_name_was_meant_as():
    tool = Tool("t", "d", closed_object({"trigger": {"type": "string"}}), lambda a, c: ToolResult("ok"),
                argument_hints={"prompt": "the first prompt is 'trigger'"})
    with pytest.raises(ToolArgumentsError,
                       match=r"'prompt' \(the first prompt is 'trigger'\); the known ones: trigger"):
        ToolRegistry([tool]).call("t", {"prompt": "x"})


def test_every_bad_field_is_reported_in_path_order():
    message = message_for({"cmd": 1, "count": 0, "timeout": -1})
    assert message.split("; ") == ["cmd: must be of type string", "count: must be >= 1", "timeout: must be > 0"]


@pytest.mark.parametrize("arguments", [[], "ls", 3, True])
def test_arguments_must_be_an_object(arguments):
    with pytest.raises(ToolArgumentsError, match=r"^arguments: must be an object$"):
        validate_arguments(SCHEMA, arguments)


def test_missing_arguments_count_as_empty():
    assert validate_arguments({"type": "object"}, None) == {}
    assert message_for(None) == "cmd: is required"


def test_valid_arguments_are_returned():
    args = {"cmd": "ls", "timeout": 1.5, "opts": {"depth": 0}, "limit": None}
    assert validate_arguments(SCHEMA, args) is args


# -- the registry ------------------------------------------------------------------------------------------------

def _echo(args, ctx):
    return ToolResult(text=f"cmd={args['cmd']} structured={ctx.structured}", data={"cmd": args["cmd"]})


def _refuse(args, ctx):
    raise ToolError("cmd: refused by policy")


def _crash(args, ctx):
    raise KeyError("x" * 2000)


@pytest.fixture
def registry():
    return ToolRegistry([
        Tool("run", "Run it.", SCHEMA, _echo, title="Run", annotations={"readOnlyHint": False}),
        Tool("refuse", "Refuse.", {"type": "object"}, _refuse),
        Tool("crash", "Crash.", {"type": "object"}, _crash),
    ])


def test_call_passes_validated_arguments_and_context(registry):
    result = registry.call("run", {"cmd": "ls"}, CallContext(structured=True))
    assert result == ToolResult(text="cmd=ls structured=True", data={"cmd": "ls"}, is_error=False)
    assert registry.call("run", {"cmd": "ls"}).text.endswith("structured=False"), "a default context"


def test_call_with_bad_arguments_raises_before_the_handler(registry):
    with pytest.raises(ToolArgumentsError, match="cmd: is required"):
        registry.call("run", {})


def test_unknown_tool(registry):
    with pytest.raises(UnknownTool):
        registry.call("nope", {})
    assert "run" in registry and "nope" not in registry


def test_expected_failure_is_an_error_result(registry):
    result = registry.call("refuse", {})
    assert result.is_error and result.text == "cmd: refused by policy" and result.data == {"error": result.text}


def test_unexpected_exception_is_a_short_error_result_and_logged(registry, caplog):
    with caplog.at_level(logging.ERROR, logger="common.protocol.tools"):
        result = registry.call("crash", {})
    assert result.is_error and result.text.startswith("internal error in tool 'crash': KeyError")
    assert len(result.text) <= 500 and "Traceback" not in result.text
    assert any(r.exc_info and "crash" in r.getMessage() for r in caplog.records), "the traceback goes to the log"


def test_listing_in_declaration_order_without_output_schema(registry):
    listing = registry.listing()
    assert [t["name"] for t in listing] == ["run", "refuse", "crash"]
    assert listing[0] == {"name": "run", "description": "Run it.", "inputSchema": SCHEMA, "title": "Run",
                          "annotations": {"readOnlyHint": False}}
    assert all("outputSchema" not in t for t in listing)
    assert set(listing[1]) == {"name", "description", "inputSchema"}


def test_declaring_a_tool_twice_is_refused(registry):
    with pytest.raises(ValueError, match="'run' declared twice"):
        registry.add(Tool("run", "Again.", {"type": "object"}, _echo))


def test_an_invalid_schema_is_refused_when_first_judged():
    registry = ToolRegistry([Tool("bad", "Bad.", {"type": "no-such-type"}, _echo)])
    with pytest.raises(SchemaError):
        registry.call("bad", {})


def test_jsonschema_is_imported_only_for_a_call_the_quick_check_does_not_pass():
    code = ("import sys; from common.protocol.tools import Tool, ToolRegistry, ToolResult, closed_object\n"
            "r = ToolRegistry([Tool('t', 'T.', closed_object({'n': {'type': 'integer'}}), "
            "lambda a, c: ToolResult(text='ok'))])\n"
            "assert r.call('t', {'n': 1}).text == 'ok' and 'jsonschema' not in sys.modules\n"
            "try:\n    r.call('t', {'n': 'x'})\n"
            "except ValueError as e:\n    assert 'n: must be of type integer' in str(e)\n"
            "assert 'jsonschema' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# ----- the shape of a tools/call result on the wire -------------------------------------------------------------

from mcp_types import methods as sdk_methods  # noqa: E402
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS  # noqa: E402

from common.protocol.methods import McpMethods, is_plain_tool_result  # noqa: E402

PLAIN_RESULTS = [
    {"content": [{"type": "text", "text": "id=1 status=done\n"}], "isError": False},
    {"content": [{"type": "text", "text": "bad\u00e9"}], "isError": True, "structuredContent": {"error": "bad"}},
    {"content": [{"type": "text", "text": ""}], "isError": False,
     "structuredContent": {"id": "a", "n": 1, "f": 0.5, "none": None, "list": [1, "x", {"k": []}]}},
]


@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS])
@pytest.mark.parametrize("result", PLAIN_RESULTS)
def test_a_plain_tool_result_is_what_the_sdk_would_send(version, result):
    """McpMethods.serialise sends a plain result as built, without the SDK's validation: that must be exactly
    the SDK's own dump of it in every protocol version (an SDK upgrade that changes this fails here)."""
    if version in MODERN_PROTOCOL_VERSIONS:
        result = {**result, "resultType": "complete"}
    assert is_plain_tool_result(result, version)
    assert sdk_methods.serialize_server_result("tools/call", version, dict(result)) == result
    assert McpMethods.serialise("tools/call", version, dict(result)) == result


@pytest.mark.parametrize("version, result", [(v, r) for v in ("2025-11-25", "2026-07-28") for r in [
    {"content": [{"type": "image", "data": "", "mimeType": "image/png"}], "isError": False},
    {"content": [{"type": "text", "text": "x", "annotations": {"priority": 1}}], "isError": False},
    {"content": [{"type": "text", "text": 1}], "isError": False},
    {"content": [{"type": "text", "text": "x"}], "isError": "no"},
    {"content": [{"type": "text", "text": "x"}], "isError": False, "structuredContent": [1]},
    {"content": [{"type": "text", "text": "x"}], "isError": False, "_meta": {}},
    {"content": [{"type": "text", "text": "x"}], "isError": False, "resultType": "input_required"},
]] + [("2026-07-28", {"content": [], "isError": False}),
      ("2025-11-25", {"content": [], "isError": False, "resultType": "complete"})])
def test_any_other_result_goes_through_the_sdk(version, result):
    assert not is_plain_tool_result(result, version)


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_a_call_over_the_body_limit_is_refused_unrun_naming_its_largest_argument(registry, version):
    """No byte_limits: the schema's maxLength (characters) is the argument's own limit; the SDK's own types
    accept the answer in both eras."""
    methods = McpMethods(registry, max_body_bytes=1000)
    params = {"name": "run", "arguments": {"cmd": "y" * 1500, "opts": {"depth": 1}}}
    result = methods.dispatch("tools/call", params, version, modern=version == "2026-07-28", body_bytes=1600)
    if version == "2026-07-28":
        result["resultType"] = "complete"
    assert sdk_methods.serialize_server_result("tools/call", version, dict(result)) == result
    text = result["content"][0]["text"]
    assert result["isError"] is True and text.startswith("invalid arguments for run: cmd: is 1,500 bytes"), text
    assert "1,600 bytes, over the 1,000-byte" in text and "at most 10 characters" in text and "Nothing was run" in text
    params = {"name": "refuse", "arguments": [1] * 10}
    text = methods.dispatch("tools/call", params, version, modern=False, body_bytes=1600)["content"][0]["text"]
    assert text.startswith("invalid arguments for refuse: arguments: the request is 1,600 bytes"), text
    ok = methods.dispatch("tools/call", {"name": "run", "arguments": {"cmd": "hi"}}, version, modern=False,
                          body_bytes=1000)
    assert ok["isError"] is False, "at the limit itself the call runs"
