"""A test-only daemon: the real transport and serving code with a small tool set that exercises every path."""

import json
import logging
import threading
import time

import click

from common.config import ServerSettings, click_options, settings_from_options
from common.protocol.call_progress import paced_wait
from common.protocol.tools import Tool, ToolError, ToolRegistry, ToolResult
from common.protocol.transport import McpApp
from common.serving.serve import serve_daemon
from common.waiting import wait_for

ECHO_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "maxLength": 1000},
                   "times": {"type": "integer", "minimum": 1, "maximum": 5}},
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


def tick(args, ctx):
    """Report `count` progress notifications `gap` seconds apart (the transport's streamed answer), then answer."""
    count, gap, sent = args.get("count", 3), args.get("gap", 0.05), 0
    for i in range(count):
        if ctx.cancel.fired:
            break
        ctx.progress.report(i + 1, count, f"tick {i + 1} of {count}")
        sent += 1
        threading.Event().wait(gap)
    return ToolResult(text=f"ticked={sent}", data={"ticked": sent})


held_calls: list[dict] = []
holding = [0]  # hold calls waiting now
held_changed = threading.Condition()


def hold(args, ctx):
    """Wait `seconds` through common.protocol.call_progress.paced_wait (progress every heartbeat), unless cancelled."""
    start = time.monotonic()
    with held_changed:
        holding[0] += 1
        held_changed.notify_all()
    paced_wait(held_changed, lambda: False, float(args.get("seconds", 10)), ctx.progress, ctx.cancel,
               news=time.monotonic, message=lambda waited: f"held {waited:.1f} s")  # always news: one a second
    with held_changed:
        holding[0] -= 1
        held_calls.append({"cancelled": ctx.cancel.fired, "gone": ctx.client_gone(),
                           "held_s": time.monotonic() - start})
        held_changed.notify_all()
    return ToolResult(text=f"held cancelled={ctx.cancel.fired}", data={})


def holds(args, ctx):
    """The calls of hold that ended (waiting up to `wait` seconds for at least `count` of them); with `holding`,
    how many wait now (waiting for at least that many), so a test knows a call reached its wait."""
    with held_changed:
        if "holding" in args:
            wait_for(held_changed, lambda: holding[0] >= args["holding"], float(args.get("wait", 0)))
            return ToolResult(text=f"holding={holding[0]}", data={"holding": holding[0]})
        wait_for(held_changed, lambda: len(held_calls) >= args.get("count", 0), float(args.get("wait", 0)))
        return ToolResult(text=json.dumps(held_calls), data={"holds": list(held_calls)})


TOOLS = [
    Tool("echo", "Echo the text back, optionally repeated.", ECHO_SCHEMA, echo),
    Tool("refuse", "Always fails with an expected error.", EMPTY, refuse),
    Tool("crash", "Always raises an unexpected exception.", EMPTY, crash),
    Tool("block", "Wait until unblock is called.",
         {"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0}}, "additionalProperties": False},
         block),
    Tool("unblock", "Release a blocked call.", EMPTY, unblock),
    Tool("tick", "Report progress count times, gap seconds apart.", {"type": "object", "properties": {
        "count": {"type": "integer", "minimum": 0, "maximum": 20},
        "gap": {"type": "number", "minimum": 0, "maximum": 2}}, "additionalProperties": False}, tick),
    Tool("hold", "Wait until cancelled (or seconds), reporting progress.", {"type": "object", "properties": {
        "seconds": {"type": "number", "minimum": 0, "maximum": 30}}, "additionalProperties": False}, hold),
    Tool("holds", "The hold calls that ended.", {"type": "object", "properties": {
        "wait": {"type": "number", "minimum": 0, "maximum": 30}, "count": {"type": "integer", "minimum": 0},
        "holding": {"type": "integer", "minimum": 0}}, "additionalProperties": False}, holds),
]


@click.command()
@click_options(ServerSettings, "HIVE_ECHO")
def main(**options):
    settings = settings_from_options(ServerSettings, options)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    serve_daemon(McpApp(ToolRegistry(TOOLS), "echo-test", "0.1.0", settings), settings, on_stop=lambda: None)


if __name__ == "__main__":
    main()
