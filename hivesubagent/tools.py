"""The MCP surface of the subagent daemon: four tools, their schemas, descriptions, arguments and handlers.

Each tool's arguments are declared twice, side by side: the JSON schema the registry validates a call against,
and the TypedDict its handler reads, so mypy checks every key read (tests/test_tool_args.py holds the two to
the same keys and the same required ones).

Each result is formatted twice from one view: `text` for the model (texts.py: a first line of stable key=value
facts, then the readable rest); `data`, the exact structured form (Claude Code would show the model only that:
docs/design.md, "MCP clients").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Required, TypedDict

from common.names import NAME_RULE
from common.notices import NO_SOCKET, Notices
from common.protocol import mcp_tasks
from common.protocol.tools import Args, CallContext, Tool, ToolRegistry, ToolResult, closed_object
from hivesubagent.answers.texts import (
    render_list,
    render_many,
    render_session,
    render_steps,
    render_waited,
    turn_result,
)
from hivesubagent.engine import SubagentEngine
from hivesubagent.place_schemas import OPTIONS, PLACE, TURN_OPTIONS, OptionArgs, PlaceArgs
from hivesubagent.requests import MAX_NAMES, MODEL_RULE, StatusRequest, check_status

NAME_SCHEMA = {
    "type": "string",
    "pattern": f"^{NAME_RULE}$",
    "description": f"Session name: {NAME_RULE} (lowercase letters, digits, '-'; 1 to 63 characters).",
}
MODEL_SCHEMA = {
    "type": "string",
    "pattern": f"^{MODEL_RULE}$",
    "description": "Model for claude's --model (an alias such as 'sonnet' or a full model id). "
                   "Omit for claude's default.",
}
TEXT_LIMIT = 1_000_000  # characters; the transport's body limit (1 MiB) binds first

BUDGET_SCHEMA = {
    "type": "number",
    "exclusiveMinimum": 0,
    "maximum": 1000,
    "description": "US dollars this turn may spend (claude's --max-budget-usd, checked after each model call); "
                   "past it the turn ends as budget_exceeded. Default: {default_budget}.",
}
MAX_TURNS_SCHEMA = {
    "type": "integer",
    "minimum": 1,
    "maximum": 100000,
    "description": "Model calls this turn may make (claude's --max-turns; the last call's tools still run); past "
                   "it the turn ends as max_turns. Default: {default_turns}.",
}
TIMEOUT_SCHEMA = {
    "type": "number",
    "exclusiveMinimum": 0,
    "maximum": 10080,
    "description": "Minutes this turn may run (fractions allowed); then SIGINT, and SIGKILL {kill_grace} s later if "
                   "it has not ended; it ends as timed_out. Default: {default_timeout}.",
}
class BoundsArgs(TypedDict, total=False):
    """The caps of a turn, as BOUNDS declares them (start and continue take them)."""

    max_budget_usd: float
    max_turns: int
    timeout_minutes: float


BOUNDS = {"max_budget_usd": BUDGET_SCHEMA, "max_turns": MAX_TURNS_SCHEMA, "timeout_minutes": TIMEOUT_SCHEMA}

# What every description says once (the facts a prompt author needs): where the subagent runs, what it can
# use, how many run at once, how to read a whole result. {workdir} and {max_running} are the daemon's own.
WHERE = (
    "The subagent is a nested headless `claude -p` running in the daemon's working directory {workdir} (not "
    "yours: give absolute paths) or the session's `cwd`, with claude's built-in tools only (Bash, Read, Edit, ...; "
    "no MCP servers, so no background-shell daemon), permissions skipped. At most {max_running} run at once."
)
RESULT_HOWTO = "Its whole result: status(name, result_offset=N) pages through it."

class StartArgs(BoundsArgs, PlaceArgs, OptionArgs, total=False):
    """`start`'s arguments, as START's schema declares them."""

    name: Required[str]
    prompt_file: Required[str]
    model: str
    trigger: str


START = dict(
    name="start",
    description=(
        "Start a fresh subagent session `name` in the background; returns once claude is confirmed running. "
        "{when_done} `prompt_file`: absolute path of a file with its task instructions (appended to its system "
        "prompt; they stay for every later turn). `trigger`: the first prompt. A finished session of the same "
        "name is archived first (never deleted). `worktree: true` for parallel or risky edits. "
        + WHERE + " " + RESULT_HOWTO
    ),
    input_schema=closed_object(
        {
            "name": NAME_SCHEMA,
            "prompt_file": {
                "type": "string",
                "minLength": 1,
                "maxLength": 4096,
                "description": "Absolute path of an existing readable regular file with the subagent's instructions.",
            },
            "model": MODEL_SCHEMA,
            "trigger": {
                "type": "string",
                "minLength": 1,
                "maxLength": TEXT_LIMIT,
                "description": "The first turn's prompt (stdin). Default: "
                               "a generic 'carry out your instructions' nudge.",
            },
            **BOUNDS, **PLACE, **OPTIONS,
        },
        required=("name", "prompt_file"),
    ),
    title="Start a subagent session",
    file_route="pass it by path: the instructions as prompt_file; a long first prompt as a short trigger that names "
               "the file's absolute path (the subagent reads it with its Read tool)",
    argument_hints={"prompt": "the first turn's prompt is 'trigger'; the instructions file is 'prompt_file'"},
)

class ContinueArgs(BoundsArgs, OptionArgs, total=False):
    """`continue`'s arguments, as CONTINUE's schema declares them."""

    name: Required[str]
    prompt: Required[str]
    model: str


CONTINUE = dict(
    name="continue",
    description=(
        "Give an existing subagent session (claude's transcript on disk, found by name; also after a daemon "
        "restart) a new turn with `prompt`; its prompt_file instructions still apply. Returns once the turn "
        "runs; {continue_done} Refused for an unknown name or one running now. It runs where the session does (its "
        "cwd or worktree), with its tools and effort unless this call names others for this turn. "
        + WHERE + " " + RESULT_HOWTO
    ),
    input_schema=closed_object(
        {
            "name": NAME_SCHEMA,
            "prompt": {"type": "string", "minLength": 1, "maxLength": TEXT_LIMIT,
                       "description": "The new turn's prompt."},
            "model": {**MODEL_SCHEMA, "description": "--model for this turn only; need not match start's. "
                                                     "Omit to keep the session's model."},
            **BOUNDS, **TURN_OPTIONS,
        },
        required=("name", "prompt"),
    ),
    title="Continue a subagent session",
    file_route="give a short prompt that names its absolute path (the subagent reads it with its Read tool)",
    argument_hints={"trigger": "continue's prompt is 'prompt'",
                    "prompt_file": "start's instructions stay in force; continue takes 'prompt'"},
)

class InterruptArgs(TypedDict, total=False):
    """`interrupt`'s arguments, as INTERRUPT's schema declares them."""

    name: Required[str]
    force: bool


INTERRUPT = dict(
    name="interrupt",
    description=(
        "Stop the running turn of subagent `name` (only a turn that runs now; nothing waits in a queue). "
        "force=false: SIGINT, so claude stops its tools and ends the turn, SIGKILL if it has not ended {kill_grace} s "
        "later; force=true: SIGKILL at once, its tool processes too. Waits for the end and answers with the "
        "outcome, what the turn did and its cost. The session stays on disk: continue resumes it."
    ),
    input_schema=closed_object(
        {
            "name": NAME_SCHEMA,
            "force": {"type": "boolean", "default": False, "description": "SIGKILL instead of SIGINT."},
        },
        required=("name",),
    ),
    title="Interrupt a subagent turn",
)

class SubagentStatusArgs(TypedDict, total=False):
    """`status`'s arguments, as STATUS's schema declares them."""

    name: str
    names: list[str]
    wait_seconds: float
    all: bool
    result_offset: int
    steps: bool
    steps_offset: int


STATUS = dict(
    name="status",
    description=(
        "Check on subagents. With `name`, running: its progress so far (steps, tool calls and the latest one, tokens, "
        "seconds since its last event), pid, elapsed time. Finished: the last turn's outcome, cost, and the start of "
        "its result; `result_offset` gives the whole result from that character, a page of up to 6 KiB at a time with "
        "the next offset; `steps: true` pages the last turn as readable steps. `wait_seconds` (max 30) waits for the "
        "turn to end; `names: [\"a\", \"b\"]` waits for the first of several (`all: true`: every one), a line each and "
        "the next call. Without `name`: every session (at most {max_running} run at once)."
    ),
    input_schema=closed_object(
        {
            "name": NAME_SCHEMA,
            "names": {"type": "array", "items": NAME_SCHEMA, "minItems": 1, "maxItems": MAX_NAMES, "uniqueItems": True,
                      "description": "Several sessions instead of name: "
                                     "the wait ends when the first running one ends."},
            "wait_seconds": {"type": "number", "minimum": 0,
                             "description": "Seconds to wait for the turn to end before answering (capped at 30; "
                                            "default 0: answer at once)."},
            "all": {"type": "boolean", "description": "With names: wait until every one has ended, not the first."},
            "result_offset": {
                "type": "integer",
                "minimum": 0,
                "description": "Character offset into the last turn's result text; the answer says the next one.",
            },
            "steps": {"type": "boolean", "description": "With name: the last turn as readable steps (prompt, replies, "
                                                        "tool calls and results), a page at a time."},
            "steps_offset": {"type": "integer", "minimum": 0,
                             "description": "With steps: the character offset to read from; "
                                            "the answer says the next one."},
        },
    ),
    title="Subagent status",
    annotations={"readOnlyHint": True},
    argument_hints={"wait": "did you mean 'wait_seconds'?", "ids": "did you mean 'names'?",
                    "id": "did you mean 'name'?"},
)

def build_registry(engine: SubagentEngine) -> ToolRegistry:
    """The four tools, their handlers bound to `engine`."""

    facts = description_facts(engine)
    task_facts = {**facts, **TASK_SAID}

    def bind(spec: dict[str, Any], fn: Callable[[SubagentEngine, Args, CallContext], ToolResult]) -> Tool[Args]:
        described = {**spec, "description": _filled(spec["description"], facts),
                     "input_schema": _described(spec["input_schema"], facts)}
        if "{when_done}" in spec["description"] or "{continue_done}" in spec["description"]:
            described["task_description"] = _filled(spec["description"], task_facts)

        def handler(args: Args, ctx: CallContext) -> ToolResult:
            return fn(engine, args, ctx)

        return Tool(handler=handler, **described)

    return ToolRegistry([bind(START, _start), bind(CONTINUE, _continue), bind(INTERRUPT, _interrupt),
                         bind(STATUS, _status)],
                        instructions=instructions(_notices(engine)),
                        task_handles=engine.tasks if engine is not None else None,
                        task_instructions=instructions(_notices(engine), client_tasks=True))


def _notices(engine: SubagentEngine | None) -> Notices:
    return engine.notices if engine is not None else Notices(True)


# What the descriptions say instead to a client of the MCP tasks extension (Claude Code's interactive session).
TASK_SAID = {
    "when_done": "You get back a task at once: the turn moves to your background tasks and its end (outcome, what it "
                 "did, the start of its result, its cost) arrives as a task notification; stopping the task "
                 "interrupts the turn.",
    "continue_done": "the turn moves to your background tasks and its end arrives as a task notification.",
}


def instructions(notices: Notices, client_tasks: bool = False) -> str:
    """What the model reads once about this server (MCP `instructions`); `client_tasks`: to a client of the
    tasks extension, whose background tasks carry each turn."""
    arrival = TASK_ARRIVAL if client_tasks else notices.say("When a turn ends, its outcome arrives as a todo; "
                          "`status(name, wait_seconds=30)` waits for it.",
                          f"No notice arrives when a turn ends ({NO_SOCKET}): `status(name, wait_seconds=30)` waits "
                          "for it (`names` and `all` for several).")
    return ("Each `start` runs a nested headless `claude -p` session in the background, known by its `name`; "
            "`continue` gives that session its next prompt and `interrupt` stops its turn. Read what a session said "
            "with `status` (`result_offset` pages through a long result), not by reading claude's transcript files. "
            + arrival)


TASK_ARRIVAL = ("`start` and `continue` answer a task once the turn runs: it moves to your background tasks and its "
                "end arrives as a task notification (stopping the task interrupts the turn); "
                "`status(name)` shows its progress meanwhile.")


def description_facts(engine: SubagentEngine | None) -> dict[str, Any]:
    """The daemon's own figures the descriptions name: its working directory, cap and defaults. Without an
    engine (a schema-only registry, as the fuzz tests build), the knobs' names."""
    notices = _notices(engine)
    said = {"when_done": notices.say("When its turn ends you get one todo with the outcome, what it did, the start of "
                                     "its result and its cost; status(name, wait_seconds=30) waits for the end.",
                                     f"No notice comes when its turn ends ({NO_SOCKET}): status(name, wait_seconds=30) "
                                     "waits for the end and answers with the outcome."),
            "continue_done": notices.say("its end arrives as a todo.",
                                         "status(name, wait_seconds=30) waits for its end.")}
    if engine is None:
        return {**said, "workdir": "(--workdir)", "cwd_roots": "the daemon's --allowed-cwd-roots",
                "max_running": "max_running", "kill_grace": "--kill-grace",
                "default_budget": "the daemon's --max-budget-usd", "default_turns": "the daemon's --max-turns",
                "default_timeout": "the daemon's --turn-timeout"}
    s = engine.settings
    return {**said, "workdir": str(engine.workdir), "cwd_roots": ", ".join(str(r) for r in engine.cwd_roots),
            "max_running": s.max_running, "kill_grace": f"{s.kill_grace:g}",
            "default_budget": f"${s.max_budget_usd:g}" if s.max_budget_usd else "none (no cap)",
            "default_turns": str(s.max_turns) if s.max_turns else "none (no cap)",
            "default_timeout": f"{s.turn_timeout / 60:g} minutes" if s.turn_timeout else "none (no limit)"}


def _filled(text: str, facts: dict[str, Any]) -> str:
    """`text` with each `{fact}` replaced (only those: a description may hold other braces, as a regex's)."""
    for key, value in facts.items():
        text = text.replace("{" + key + "}", str(value))
    return text


def _described(schema: Any, facts: dict[str, Any]) -> Any:
    """The schema with every property's description filled in with `facts`."""
    if isinstance(schema, dict):
        return {k: (_filled(v, facts) if k == "description" and isinstance(v, str) else _described(v, facts))
                for k, v in schema.items()}
    return schema


# ---------------------------------------------------------------------------------------------- handlers


def _start(engine: SubagentEngine, args: StartArgs, ctx: CallContext) -> ToolResult:
    return _as_task(engine, turn_result(engine.start(**args), "started", engine.notices), ctx)


def _continue(engine: SubagentEngine, args: ContinueArgs, ctx: CallContext) -> ToolResult:
    return _as_task(engine, turn_result(engine.continue_(**args), "continued", engine.notices), ctx)


def _as_task(engine: SubagentEngine, result: ToolResult, ctx: CallContext) -> ToolResult:
    """To a client of the tasks extension, a turn that runs is answered as a task (an ended one as always)."""
    if not ctx.client_tasks or "outcome" in result.data:
        return result
    opened = engine.tasks.open_running(str(result.data["name"]))
    if opened is None:  # it ended in the meantime: the plain answer says so on the next status
        return result
    handle, state = opened
    first = result.text.splitlines()[0]
    name = result.data["name"]
    # Claude Code shows the note on one line (its line breaks become spaces): each part ends its sentence.
    immediate = (f"{first}. Its end arrives as a task notification. status(name=\"{name}\") shows its progress, "
                 f"status(name=\"{name}\", steps=true) what it did so far; stopping the task interrupts the turn.")
    return replace(result, task=mcp_tasks.create_task_result(handle, state, immediate))


def _interrupt(engine: SubagentEngine, args: InterruptArgs, ctx: CallContext) -> ToolResult:
    view = engine.interrupt(**args)
    if "outcome" in view and not ctx.operator:
        engine.tasks.shown([view["name"]])
    return turn_result(view, "interrupted", engine.notices)


def _status(engine: SubagentEngine, args: SubagentStatusArgs, ctx: CallContext) -> ToolResult:
    request = check_status(args)
    match request.kind:
        case "wait":
            return _waited(engine, request, ctx)
        case "steps":
            steps = engine.steps_of(request)
            return ToolResult(text=render_steps(steps), data=steps)
        case _:
            data = engine.sessions_of(request)
            if "sessions" not in data and not data.get("running") and not ctx.operator:
                engine.tasks.shown([data["name"]])
            if "sessions" in data:
                return ToolResult(text=render_list(data), data=data)
            return ToolResult(text=render_session(data), data=data)


def _waited(engine: SubagentEngine, request: StatusRequest, ctx: CallContext) -> ToolResult:
    data = engine.waited(request, ctx.progress, ctx.cancel)
    if not ctx.operator:
        engine.tasks.shown([s["name"] for s in data["sessions"] if not s.get("running")])
    if request.single:
        session, wait = data["sessions"][0], data["wait"]
        return ToolResult(text=render_waited(session, wait), data={**session, "wait": wait})
    return ToolResult(text=render_many(data), data=data)
