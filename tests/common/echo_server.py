"""A test-only daemon: the real transport and serving code with a small tool set that exercises every path."""

import logging
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import click  # noqa: E402

from common.config import ServerSettings, click_options, settings_from_options  # noqa: E402
from common.mcp_http import McpApp  # noqa: E402
from common.serve import serve_daemon  # noqa: E402
from common.tools import Tool, ToolError, ToolRegistry, ToolResult  # noqa: E402

ECHO_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "maxLength": 1000}, "times": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["text"],
    "additionalProperties": False,
}
EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}
release = threading.Event()


def echo(args, ctx):
    text = args["text"] * args.get("times", 1)
    return ToolResult(text=f"echo={text}", data={"echo": text})


def refuse(args, ctx):
    raise ToolError("refuse: this tool always refuses (expected failure)")


def crash(args, ctx):
    raise RuntimeError("boom")


def block(args, ctx):
    """Hold a request thread until `unblock` is called (or 10 s): lets tests prove other calls are not queued."""
    released = release.wait(float(args.get("seconds", 10)))
    release.clear()
    return ToolResult(text=f"released={released}", data={"released": released})


def unblock(args, ctx):
    release.set()
    return ToolResult(text="ok", data={})


TOOLS = [
    Tool("echo", "Echo the text back, optionally repeated.", ECHO_SCHEMA, echo),
    Tool("refuse", "Always fails with an expected error.", EMPTY, refuse),
    Tool("crash", "Always raises an unexpected exception.", EMPTY, crash),
    Tool("block", "Wait until unblock is called.", {"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0}}, "additionalProperties": False}, block),
    Tool("unblock", "Release a blocked call.", EMPTY, unblock),
]


@click.command()
@click_options(ServerSettings, "HIVE_ECHO")
def main(**options):
    settings = settings_from_options(ServerSettings, options)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    serve_daemon(McpApp(ToolRegistry(TOOLS), "echo-test", "0.1.0", settings), settings, on_stop=lambda: None)


if __name__ == "__main__":
    main()
