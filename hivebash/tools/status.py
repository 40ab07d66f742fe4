"""The `status` tool: its arguments, schema and handler."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from common.notices import Notices
from common.protocol.tools import CallContext, Tool, ToolResult, closed_object
from hivebash import output_views as ov
from hivebash.answers.outcomes import ManyOutcome
from hivebash.answers.texts import many_result, outcome_result
from hivebash.tools.declaring import ID_SCHEMA, WAIT_FOR_SCHEMA, WAIT_SCHEMA, bound
from hivebash.verbs.requests import MAX_IDS

if TYPE_CHECKING:
    from hivebash.engine import Engine


class StatusArgs(TypedDict, total=False):
    """`status`'s arguments, as status_declaration's schema declares them."""

    id: str
    ids: list[str]
    all: bool
    wait_seconds: float
    wait_for: str
    grep: str
    context: int
    from_line: int
    max_lines: int
    tail_lines: int
    stream: str  # one of output_views.STREAMS
    new_only: bool


def status_declaration(notices: Notices) -> dict[str, Any]:
    clears = notices.say(" Showing you a finished task clears its todo.", "")
    return dict(
        name="status",
        description=(
            "A task's state (pending, running, done, timed_out, interrupted, killed), exit_code, duration, CPU, "
            "processes it left alive, and the end of stdout and stderr (4 KiB each; `tail_lines: 20` for the last 20 "
            "lines, e.g. when polling a chatty server). Views of the whole output instead, each under 8 KiB: `grep: "
            "\"error|FAIL\"` (numbered matching lines; `context: 2` adds lines around), `from_line: 5000, max_lines: "
            "40` (a window; `max_lines` alone or a negative from_line: the last lines), `stream: \"stderr\"`, "
            "`new_only: true` (only output you were not shown yet). `wait_seconds` (max 30) waits for the end; "
            "`ids: [\"a\", \"b\"]` waits for the next of several to end (`all: true`: for every one); `wait_for: "
            f"\"regex\"` also ends the wait at a line you were not shown yet.{clears} `interrupted`: the daemon "
            "stopped while it ran."
        ),
        input_schema=closed_object(
            {
                "id": ID_SCHEMA,
                "ids": {"type": "array", "items": ID_SCHEMA, "minItems": 1, "maxItems": MAX_IDS, "uniqueItems": True,
                        "description": "Several task ids instead of id: the wait ends when the next of those still "
                                       "running ends (or, with all, when every one has)."},
                "all": {"type": "boolean", "description": "With ids: wait until every task has ended."},
                "wait_seconds": WAIT_SCHEMA,
                "wait_for": WAIT_FOR_SCHEMA,
                "grep": {"type": "string", "minLength": 1, "maxLength": 1000,
                         "description": "A Python regex: the matching lines of the whole output, numbered."},
                "context": {"type": "integer", "minimum": 0, "maximum": ov.CONTEXT_MAX,
                            "description": "With grep: lines shown before and after each match (default 0)."},
                "from_line": {"type": "integer", "minimum": -1_000_000_000_000, "maximum": 1_000_000_000_000,
                              "description": "Show lines from this one (the first line is 1; -20: the last 20)."},
                "max_lines": {"type": "integer", "minimum": 1, "maximum": ov.MAX_LINES_MAX,
                              "description": f"How many lines (default {ov.DEFAULT_MAX_LINES}); alone: the last ones."},
                "tail_lines": {"type": "integer", "minimum": 1, "maximum": ov.MAX_LINES_MAX,
                               "description": "The tails as the last N lines of each stream (fewer bytes when "
                                              "polling; more lines, within the 8 KiB bound)."},
                "stream": {"type": "string", "enum": list(ov.STREAMS),
                           "description": "Only this stream (default both)."},
                "new_only": {"type": "boolean",
                             "description": "Only the output written since the last answer that showed you its end."},
            },
        ),
    )


def _answer_status(engine: Engine, args: StatusArgs, ctx: CallContext) -> ToolResult:
    outcome = engine.status(call=ctx, **args)
    if isinstance(outcome, ManyOutcome):
        return many_result(outcome)
    return outcome_result(outcome, started_form=False)


def status_tool(engine: Engine | None, notices: Notices) -> Tool[StatusArgs]:
    return Tool(handler=bound(engine, _answer_status), title="Status and output of background tasks",
                **status_declaration(notices), annotations={"readOnlyHint": True})
