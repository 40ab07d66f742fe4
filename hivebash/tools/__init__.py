"""The MCP surface of the bash daemon: a module a tool (`run`, `status`, `send`, `kill`, `list`), each with its
arguments' TypedDict, its schema and its handler; here the registry that binds them to one engine, and the
instructions.

Each tool's arguments are declared twice, side by side: the JSON schema the registry validates a call against,
and the TypedDict its handler reads, so mypy checks every key read (tests/test_tool_args.py holds the two to
the same keys and the same required ones)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from common.notices import NO_SOCKET, Notices
from common.protocol.tools import ToolRegistry
from hivebash.tools import kill, listing, run, send, status
from hivebash.tools.client_tasks import BashTaskHandles
from hivebash.tools.kill import KillArgs
from hivebash.tools.listing import ListArgs
from hivebash.tools.run import RunArgs
from hivebash.tools.send import SendArgs
from hivebash.tools.status import StatusArgs

if TYPE_CHECKING:
    from hivebash.engine import Engine

__all__ = ["KillArgs", "ListArgs", "RunArgs", "SendArgs", "StatusArgs", "build_registry", "instructions"]


def build_registry(engine: Engine | None) -> ToolRegistry:
    """The five tools bound to one engine."""
    # engine None: the declarations only (tests/robustness reads the schemas without an engine)
    cwd, notices = ((engine.default_cwd, engine.notices) if engine is not None
                    else ("the daemon's directory", Notices(True)))
    handles = BashTaskHandles(engine) if engine is not None else None
    return ToolRegistry([run.run_tool(engine, notices, cwd, handles), status.status_tool(engine, notices),
                         send.send_tool(engine), kill.kill_tool(engine, notices), listing.list_tool(engine)],
                        instructions=instructions(notices), task_handles=handles,
                        task_instructions=instructions(notices, client_tasks=True))


def instructions(notices: Notices, client_tasks: bool = False) -> str:
    """What the model reads once about this server (MCP `instructions`); `client_tasks`: for a client of the
    tasks extension, where a task still running after the wait becomes one of the client's background tasks."""
    arrival = notices.say(
        "A task that outlives its inline wait reports its end as a todo; a `status` that shows you the end clears it.",
        f"No completion notice reaches you ({NO_SOCKET}): check running tasks with `status(id, wait_seconds=30)` "
        "or `status(ids=[...], all=true, wait_seconds=30)`.")
    if client_tasks:
        arrival = ("A task still running when `run`'s wait ends moves to your client's background tasks: you get "
                   "control back at once and its result arrives as a task notification when it ends; `status`, "
                   "`send` and `kill` still take its id.")
    return ("Every `run` already runs its command in the background, in a fresh `bash -c`: do not end `cmd` with `&` "
            "or wrap it in `nohup`; wait with `wait_seconds` (up to 30) or `wait_for` a line such as a server's "
            "ready message. Read output through `status` (its tail, `tail_lines`, `new_only`, `grep`, "
            "`from_line`/`max_lines`; each answer stays under 8 KiB), not with `Read` of an output file, which may "
            f"be huge. {arrival}")
