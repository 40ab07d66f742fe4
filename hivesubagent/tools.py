"""The MCP surface of the subagent daemon: four tools, their schemas and descriptions, and result formatting.

Each result is formatted twice from one view: `text` for the model, a first line of stable key=value facts and
then the readable rest; `data`, the exact structured form (Claude Code would show the model only that:
docs/design.md, "MCP clients").
"""

from __future__ import annotations

import json
from typing import Any

from common.names import NAME_RULE
from common.tools import CallContext, Tool, ToolError, ToolRegistry, ToolResult, closed_object

from hivesubagent.engine import SubagentEngine, SubagentError
from hivesubagent.result_pages import read_on

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
LIST_TEXT_BYTES = 7 * 1024  # status() of every session: the lines that fit; an answer the model reads stays < 8 KiB
TEXT_LIMIT = 1_000_000  # characters; the transport's body limit (1 MiB) binds first

BUDGET_SCHEMA = {
    "type": "number",
    "exclusiveMinimum": 0,
    "maximum": 1000,
    "description": "US dollars this turn may spend (claude's --max-budget-usd, checked after each model call); "
                   "past it the turn ends as budget_exceeded. Omit for the daemon's default.",
}

# What every description says once (the facts a prompt author needs): where the subagent runs, what it can
# use, how many run at once, how to read a whole result. {workdir} and {max_running} are the daemon's own.
WHERE = (
    "The subagent is a nested headless `claude -p` running in the daemon's working directory {workdir} (not "
    "yours: give absolute paths), with claude's built-in tools only (Bash, Read, Edit, ...; no MCP servers, so "
    "no background-shell daemon), permissions skipped. At most {max_running} run at once."
)
RESULT_HOWTO = "Its whole result: status(name, result_offset=N) pages through it."

START = dict(
    name="start",
    description=(
        "Start a fresh subagent session `name` in the background; returns once claude is confirmed running. "
        "When its turn ends you get one todo (get_loose_ends) with the outcome, the start of its result and "
        "its cost. `prompt_file`: absolute path of a file with its task instructions (appended to its system "
        "prompt; they stay for every later turn). `trigger`: the first prompt. A finished session of the same "
        "name is archived first (*.jsonl.archived, never deleted). " + WHERE + " " + RESULT_HOWTO
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
                "description": "The first turn's prompt (stdin). Default: a generic 'carry out your instructions' nudge.",
            },
            "max_budget_usd": BUDGET_SCHEMA,
        },
        required=("name", "prompt_file"),
    ),
    title="Start a subagent session",
)

CONTINUE = dict(
    name="continue",
    description=(
        "Give an existing subagent session (claude's transcript on disk, found by name; also after a daemon "
        "restart) a new turn with `prompt`; its prompt_file instructions still apply. Returns once the turn "
        "runs; its end arrives as a todo. Refused for an unknown name or one running now. "
        + WHERE + " " + RESULT_HOWTO
    ),
    input_schema=closed_object(
        {
            "name": NAME_SCHEMA,
            "prompt": {"type": "string", "minLength": 1, "maxLength": TEXT_LIMIT, "description": "The new turn's prompt."},
            "model": {**MODEL_SCHEMA, "description": "--model for this turn only; need not match start's. Omit to keep the session's model."},
            "max_budget_usd": BUDGET_SCHEMA,
        },
        required=("name", "prompt"),
    ),
    title="Continue a subagent session",
)

INTERRUPT = dict(
    name="interrupt",
    description=(
        "Stop the running turn of subagent `name` (nothing is queued to cancel). force=false: SIGINT, SIGKILL "
        "after the daemon's grace period; force=true: SIGKILL at once, its tool processes too. Answers with the "
        "turn's outcome once ended. The session stays on disk: continue resumes it."
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

STATUS = dict(
    name="status",
    description=(
        "Check on subagents. With `name`, running: its progress so far (steps, tool calls and the latest one, "
        "tokens, seconds since its last event), pid, elapsed time. Finished: the last turn's outcome, cost, and "
        "the start of its result; `result_offset` gives the whole result from that character, a page of up to "
        "6 KiB at a time with the next offset. Without `name`: every session (at most {max_running} run at once)."
    ),
    input_schema=closed_object(
        {
            "name": NAME_SCHEMA,
            "result_offset": {
                "type": "integer",
                "minimum": 0,
                "description": "Character offset into the last turn's result text; the answer says the next one.",
            },
        },
    ),
    title="Subagent status",
    annotations={"readOnlyHint": True},
)

def build_registry(engine: SubagentEngine) -> ToolRegistry:
    """The four tools, their handlers bound to `engine`."""

    # Without an engine (a schema-only registry, as the fuzz tests build), the descriptions name the knobs.
    facts = ({"workdir": str(engine.workdir), "max_running": engine.settings.max_running} if engine is not None
             else {"workdir": "(--workdir)", "max_running": "max_running"})

    def bind(spec: dict[str, Any], fn) -> Tool:
        described = {**spec, "description": spec["description"].format(**facts)}
        return Tool(handler=lambda args, ctx: fn(engine, args, ctx), **described)

    return ToolRegistry([bind(START, _start), bind(CONTINUE, _continue), bind(INTERRUPT, _interrupt), bind(STATUS, _status)])


# ---------------------------------------------------------------------------------------------- handlers


def _call(fn, *args, **kwargs) -> dict[str, Any]:
    try:
        return fn(*args, **kwargs)
    except SubagentError as exc:
        raise ToolError(str(exc)) from None


def _start(engine: SubagentEngine, args: dict, ctx: CallContext) -> ToolResult:
    view = _call(engine.start, args["name"], args["prompt_file"], args.get("model"), args.get("trigger"), args.get("max_budget_usd"))
    return _turn_result(view, "started")


def _continue(engine: SubagentEngine, args: dict, ctx: CallContext) -> ToolResult:
    view = _call(engine.continue_, args["name"], args["prompt"], args.get("model"), args.get("max_budget_usd"))
    return _turn_result(view, "continued")


def _interrupt(engine: SubagentEngine, args: dict, ctx: CallContext) -> ToolResult:
    view = _call(engine.interrupt, args["name"], bool(args.get("force", False)))
    return _turn_result(view, "interrupted")


def _status(engine: SubagentEngine, args: dict, ctx: CallContext) -> ToolResult:
    data = _call(engine.status, args.get("name"), args.get("result_offset"))
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


def _known(**facts: Any) -> dict[str, Any]:
    """Only the facts that are known: a model the answer cannot vouch for is left out, not guessed."""
    return {k: v for k, v in facts.items() if v is not None}


def _result_lines(name: str, text: str, total: int, next_offset: int | None, label: str) -> list[str]:
    if not text:
        return []
    head = f"{label} ({len(text)} of {total} characters):" if next_offset is not None else f"{label}:"
    return [head, text] + ([read_on(name, next_offset, total)] if next_offset is not None else [])


def _turn_result(view: dict[str, Any], verb: str) -> ToolResult:
    """A start/continue/interrupt answer: running (with how to follow it) or, if it already ended, its outcome."""
    name = view["name"]
    if "outcome" in view:
        o = view["outcome"]
        first = kv(state="ended", name=name, outcome=o["outcome"], session_id=view["session_id"], turn=view["turn"],
                   cost_usd=o["cost_usd"], total_cost_usd=o["total_cost_usd"], duration_s=o["duration_s"],
                   **_known(max_budget_usd=o.get("max_budget_usd")))
        lines = [first, f"detail: {o['detail']}"]
        lines += _result_lines(name, o["result_text"], o["result_chars"], o.get("result_next_offset"), "result")
        lines.append(f"transcript: {view['transcript']}")
        failed = verb != "interrupted" and o["outcome"] in ("error",)
        return ToolResult(text="\n".join(lines), data=view, is_error=failed)
    first = kv(state=view["state"], name=name, session_id=view["session_id"], turn=view["turn"], pid=view["pid"],
               **_known(model=view.get("model"), max_budget_usd=view.get("max_budget_usd")))
    lines = [first]
    if verb == "interrupted":
        lines.append(f"signals sent: {', '.join(f'{k} ({v})' for k, v in view['signals'].items())}; the turn has not ended yet.")
        lines.append(f'Its outcome arrives as a todo; status(name="{name}") shows it meanwhile.')
    else:
        if view.get("archived"):
            lines.append("archived the earlier session(s) of this name: " + ", ".join(view["archived"]))
        lines.append(
            f"{verb} in the background. When the turn ends you get a todo with its outcome. "
            f'status(name="{name}") shows its progress; interrupt(name="{name}") stops it.'
        )
    lines.append(f"transcript: {view['transcript']}")
    return ToolResult(text="\n".join(lines), data=view)


def _progress_line(p: dict[str, Any]) -> str:
    tools = ", ".join(f"{n} x{c}" for n, c in list(p["tools"].items())[:8]) or "none yet"
    line = f"progress: {p['steps']} step(s), {p['tool_calls']} tool call(s) ({tools}); last event {p['idle_s']:.1f}s ago"
    if p.get("input_tokens") is not None:
        line += f"; tokens so far (as claude reported them) in={p['input_tokens']} out={p['output_tokens']}"
    if p.get("latest_tool"):
        line += f"\nlatest tool call: {p['latest_tool']}: {p['latest_tool_input']}"
    return line


def render_session(view: dict[str, Any]) -> str:
    name = view["name"]
    if view.get("running") and "turn" in view:
        first = kv(name=name, state=view["state"], running=True, session_id=view["session_id"], turn=view["turn"],
                   pid=view["pid"], elapsed_s=view["elapsed_s"],
                   **_known(model=view.get("model"), max_budget_usd=view.get("max_budget_usd")))
        lines = [first, _progress_line(view["progress"]), f"started_at: {view['started_at']}", f"transcript: {view['transcript']}"]
        if view.get("turns_done"):
            lines.append(f"earlier turns: {view['turns_done']}, costing {kv(total_cost_usd=view['total_cost_usd']).split('=', 1)[1]} USD in all "
                         "(claude reports a turn's cost when it ends)")
        if view["signals"]:
            lines.append("signals sent: " + ", ".join(f"{k} ({v})" for k, v in view["signals"].items()))
        return "\n".join(lines)
    last = view.get("last_turn") or {}
    first = kv(name=name, state=view["state"], running=view["running"], session_id=view["session_id"], turns=view["turns"],
               **_known(pid=view.get("pid"), model=view.get("model")), last_outcome=last.get("outcome"),
               last_cost_usd=last.get("cost_usd"), total_cost_usd=view["total_cost_usd"], last_duration_s=last.get("duration_s"),
               **_known(max_budget_usd=last.get("max_budget_usd")))
    lines = [first, f"updated_at: {view['updated_at']}", f"transcript: {view['transcript']}"]
    if view.get("started_by"):
        lines.append(f"running in pid {view['pid']}, {view['started_by']}: continue and start refuse it until it exits")
    if last.get("detail"):
        lines.append(f"detail: {last['detail']}")
    if last.get("exited_without_result"):
        lines.append("the last turn ended without a result (interrupted, killed or crashed)")
    result_page = view.get("result_page")
    if result_page is not None:
        lines.append(kv(result_offset=result_page["offset"], chars=result_page["chars"], total_chars=result_page["total_chars"],
                        next_offset=result_page["next_offset"]))
        lines.append(result_page["text"])
        lines.append(read_on(name, result_page["next_offset"], result_page["total_chars"]) or "(end of the result)")
    else:
        lines += _result_lines(name, last.get("result_text") or "", last.get("result_chars") or 0, last.get("result_next_offset"), "last result")
    return "\n".join(lines)


def render_list(data: dict[str, Any]) -> str:
    sessions = data["sessions"]
    lines = [kv(sessions=len(sessions), running=data["running"], more=data["more"])]
    for s in sessions:
        if s.get("running") and "turn" in s:
            p = s["progress"]
            lines.append(kv(name=s["name"], state=s["state"], session_id=s["session_id"], turn=s["turn"], elapsed_s=s["elapsed_s"],
                            steps=p["steps"], tool_calls=p["tool_calls"], idle_s=p["idle_s"]))
        else:
            last = s.get("last_turn") or {}
            lines.append(kv(name=s["name"], state=s["state"], session_id=s["session_id"], turns=s["turns"], **_known(pid=s.get("pid")),
                            last_outcome=last.get("outcome"), total_cost_usd=s["total_cost_usd"], updated_at=s["updated_at"]))
    if not sessions:
        lines.append("no sessions yet: start(name, prompt_file) creates one")
    return _within(lines, LIST_TEXT_BYTES)


def _within(lines: list[str], limit: int) -> str:
    """The first line and as many of the rest as fit in `limit` bytes, then how many were left out."""
    kept, used = lines[:1], len(lines[0].encode()) + 100  # room for the closing note
    for line in lines[1:]:
        used += len(line.encode()) + 1
        if used > limit:
            left = len(lines) - len(kept)
            kept.append(f"... {left} more not shown: status(name=...) shows one session")
            break
        kept.append(line)
    return "\n".join(kept)
