"""The MCP surface of the subagent daemon: four tools, their schemas and descriptions, and result formatting.

Each result is formatted twice from one view (DESIGN.md, "Results the model reads"): `text` for the model, a
first line of stable key=value facts and then the readable rest; `data`, the exact structured form.
"""

from __future__ import annotations

import json
from typing import Any

from common.names import NAME_RULE
from common.tools import CallContext, Tool, ToolError, ToolRegistry, ToolResult

from hivesubagent.engine import SubagentEngine, SubagentError

NAME_SCHEMA = {
    "type": "string",
    "pattern": f"^{NAME_RULE}$",
    "description": f"Session name: {NAME_RULE} (lowercase letters, digits, '-'; 1 to 63 characters).",
}
# A model id or alias as claude takes it ("opus", "claude-opus-4-5", "sonnet[1m]", a Bedrock ARN); never
# starting with '-', so it cannot be read as a flag.
MODEL_SCHEMA = {
    "type": "string",
    "pattern": r"^[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]{0,199}$",
    "description": "Model for claude's --model (an alias such as 'sonnet' or a full model id). Omit for claude's default.",
}
TEXT_LIMIT = 1_000_000  # characters; the transport's body limit (1 MiB) binds first

START = dict(
    name="start",
    description=(
        "Start a fresh subagent: a nested headless `claude -p` session under `name`, running in the background. "
        "Returns as soon as the process is confirmed running, not when it finishes; when its turn ends you get "
        "one todo (get_loose_ends) with the outcome, the start of its result and its cost. "
        "`prompt_file` (an absolute path to a regular file) holds the subagent's task instructions: it is "
        "appended to the subagent's system prompt. `trigger` is the first turn's prompt (default: a generic "
        "'carry out your instructions'). A finished earlier session of the same name is archived first "
        "(renamed *.jsonl.archived, never deleted), so this is a real fresh start. Refused while a session of "
        "that name is running, or when the daemon's max_running sessions already run. The subagent always runs "
        "with --dangerously-skip-permissions --strict-mcp-config."
    ),
    input_schema={
        "type": "object",
        "properties": {
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
                "description": "The first turn's prompt (stdin). Default: a generic 'carry out your instructions' nudge.",
            },
        },
        "required": ["name", "prompt_file"],
        "additionalProperties": False,
    },
    title="Start a subagent session",
)

CONTINUE = dict(
    name="continue",
    description=(
        "Give an existing named subagent session a new turn: a follow-up instruction after its previous turn "
        "finished, or reattaching after the daemon restarted (the session is claude's own transcript on disk, "
        "found by name). Returns as soon as the turn is confirmed running; its end arrives as a todo like "
        "start's. Refused for a name with no session on disk, or one that is running now."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": NAME_SCHEMA,
            "prompt": {"type": "string", "minLength": 1, "maxLength": TEXT_LIMIT, "description": "The new turn's prompt."},
            "model": {**MODEL_SCHEMA, "description": "--model for this turn only; need not match start's. Omit to keep the session's model."},
        },
        "required": ["name", "prompt"],
        "additionalProperties": False,
    },
    title="Continue a subagent session",
)

INTERRUPT = dict(
    name="interrupt",
    description=(
        "Stop the running turn of subagent `name`. Only works while it is running (nothing is queued to cancel). "
        "force=false (default): SIGINT, letting claude stop cleanly (it becomes SIGKILL if claude has not exited "
        "after the daemon's grace period); force=true: SIGKILL at once, tool processes included. Answers with "
        "the turn's outcome once it has ended. The session stays on disk: continue can resume it."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": NAME_SCHEMA,
            "force": {"type": "boolean", "default": False, "description": "SIGKILL instead of SIGINT."},
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    title="Interrupt a subagent turn",
)

STATUS = dict(
    name="status",
    description=(
        "Check on subagents. With `name`: whether it is running, its session id and transcript path, model, "
        "turns, the last turn's outcome and the start of its result, cost (last turn and cumulative), duration. "
        "Without: every session known (running ones, and finished ones from their transcripts). To learn what a "
        "subagent did in detail, Read its transcript or ask it with continue."
    ),
    input_schema={
        "type": "object",
        "properties": {"name": NAME_SCHEMA},
        "additionalProperties": False,
    },
    title="Subagent status",
    annotations={"readOnlyHint": True},
)

def build_registry(engine: SubagentEngine) -> ToolRegistry:
    """The four tools, their handlers bound to `engine`."""

    def bind(spec: dict[str, Any], fn) -> Tool:
        return Tool(handler=lambda args, ctx: fn(engine, args, ctx), **spec)

    return ToolRegistry([bind(START, _start), bind(CONTINUE, _continue), bind(INTERRUPT, _interrupt), bind(STATUS, _status)])


# ---------------------------------------------------------------------------------------------- handlers


def _call(fn, *args, **kwargs) -> dict[str, Any]:
    try:
        return fn(*args, **kwargs)
    except SubagentError as exc:
        raise ToolError(str(exc)) from None


def _start(engine: SubagentEngine, args: dict, ctx: CallContext) -> ToolResult:
    view = _call(engine.start, args["name"], args["prompt_file"], args.get("model"), args.get("trigger"))
    return _turn_result(view, "started")


def _continue(engine: SubagentEngine, args: dict, ctx: CallContext) -> ToolResult:
    view = _call(engine.continue_, args["name"], args["prompt"], args.get("model"))
    return _turn_result(view, "continued")


def _interrupt(engine: SubagentEngine, args: dict, ctx: CallContext) -> ToolResult:
    view = _call(engine.interrupt, args["name"], bool(args.get("force", False)))
    return _turn_result(view, "interrupted")


def _status(engine: SubagentEngine, args: dict, ctx: CallContext) -> ToolResult:
    data = _call(engine.status, args.get("name"))
    if "sessions" in data:
        return ToolResult(text=render_list(data), data=data)
    return ToolResult(text=render_session(data), data=data)


# ---------------------------------------------------------------------------------------------- text for the model


def kv(**facts: Any) -> str:
    """`key=value` pairs on one line; a value with spaces or quotes is JSON-quoted so the line stays parseable."""
    out = []
    for key, value in facts.items():
        if value is None:
            value = "none"
        elif isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, float):
            value = f"{value:.6f}".rstrip("0").rstrip(".") if key.endswith("usd") else f"{value:.1f}"
        value = str(value)
        if not value or any(c.isspace() or c in "\"'=" for c in value):
            value = json.dumps(value)
        out.append(f"{key}={value}")
    return " ".join(out)


def _turn_result(view: dict[str, Any], verb: str) -> ToolResult:
    """A start/continue/interrupt answer: running (with how to follow it) or, if it already ended, its outcome."""
    name = view["name"]
    if "outcome" in view:
        o = view["outcome"]
        first = kv(state="ended", name=name, outcome=o["outcome"], session_id=view["session_id"], turn=view["turn"],
                   cost_usd=o["cost_usd"], total_cost_usd=o["total_cost_usd"], duration_s=o["duration_s"])
        lines = [first, f"detail: {o['detail']}"]
        if o["result_text"]:
            lines += ["result:", o["result_text"]]
        lines.append(f"transcript: {view['transcript']}")
        failed = verb != "interrupted" and o["outcome"] in ("error",)
        return ToolResult(text="\n".join(lines), data=view, is_error=failed)
    first = kv(state=view["state"], name=name, session_id=view["session_id"], turn=view["turn"], pid=view["pid"], model=view["model"] or "default")
    lines = [first]
    if verb == "interrupted":
        lines.append(f"signals sent: {', '.join(f'{k} ({v})' for k, v in view['signals'].items())}; the turn has not ended yet.")
        lines.append(f'Its outcome arrives as a todo; status(name="{name}") shows it meanwhile.')
    else:
        if view.get("archived"):
            lines.append("archived the earlier session(s) of this name: " + ", ".join(view["archived"]))
        lines.append(
            f"{verb} in the background. When the turn ends you get a todo with its outcome. "
            f'status(name="{name}") checks on it; interrupt(name="{name}") stops it.'
        )
    lines.append(f"transcript: {view['transcript']}")
    return ToolResult(text="\n".join(lines), data=view)


def render_session(view: dict[str, Any]) -> str:
    if view.get("running"):
        first = kv(name=view["name"], state=view["state"], running=True, session_id=view["session_id"], turn=view["turn"],
                   pid=view["pid"], model=view["model"] or "default", elapsed_s=view["elapsed_s"])
        lines = [first, f"started_at: {view['started_at']}", f"transcript: {view['transcript']}"]
        if view.get("turns_done"):
            lines.append(f"earlier turns: {view['turns_done']}, costing {kv(total_cost_usd=view['total_cost_usd']).split('=', 1)[1]} USD in all")
        if view["signals"]:
            lines.append("signals sent: " + ", ".join(f"{k} ({v})" for k, v in view["signals"].items()))
        return "\n".join(lines)
    last = view.get("last_turn") or {}
    first = kv(name=view["name"], state=view["state"], running=False, session_id=view["session_id"], turns=view["turns"],
               model=view["model"] or "unknown", last_outcome=last.get("outcome"), last_cost_usd=last.get("cost_usd"),
               total_cost_usd=view["total_cost_usd"], last_duration_s=last.get("duration_s"))
    lines = [first, f"updated_at: {view['updated_at']}", f"transcript: {view['transcript']}"]
    if last.get("exited_without_result"):
        lines.append("the last turn ended without a result (interrupted, killed or crashed)")
    if last.get("result_text"):
        lines += ["last result:", last["result_text"]]
    return "\n".join(lines)


def render_list(data: dict[str, Any]) -> str:
    sessions = data["sessions"]
    lines = [kv(sessions=len(sessions), running=data["running"], more=data["more"])]
    for s in sessions:
        if s.get("running"):
            lines.append(kv(name=s["name"], state=s["state"], session_id=s["session_id"], turn=s["turn"], elapsed_s=s["elapsed_s"]))
        else:
            last = s.get("last_turn") or {}
            lines.append(kv(name=s["name"], state="finished", session_id=s["session_id"], turns=s["turns"],
                            last_outcome=last.get("outcome"), total_cost_usd=s["total_cost_usd"], updated_at=s["updated_at"]))
    if not sessions:
        lines.append("no sessions yet: start(name, prompt_file) creates one")
    return "\n".join(lines)
