"""The `send` tool: its declaration and its answer (what the task printed since the write, its state, the next
call). The verb itself is send.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Required, TypedDict

from common.protocol.tools import CallContext, Tool, ToolResult, closed_object
from hivebash.answers.texts import asking_text, facts_line
from hivebash.stdin.keys import LISTED, MAX_KEYS
from hivebash.tasks.todo_rules import still_alive_line
from hivebash.tools.declaring import ID_SCHEMA, WAIT_FOR_SCHEMA, bound
from hivebash.verbs.requests import SEND_LIMIT, SEND_WAIT_DEFAULT
from hivebash.verbs.send import SendOutcome

if TYPE_CHECKING:
    from hivebash.engine import Engine


class SendArgs(TypedDict, total=False):
    """`send`'s arguments, as send_declaration's schema declares them."""

    id: Required[str]
    text: str
    keys: list[str]
    enter: bool
    eof: bool
    wait_seconds: float
    wait_for: str


def send_declaration(id_schema: dict, wait_for_schema: dict) -> dict:
    return dict(
        name="send",
        description=(
            "Type into a task started with stdin \"pipe\" or \"tty\": `text` is written followed by Enter (unless "
            "`enter: false`), then `keys` for a tty (ctrl-c, ctrl-d, tab, up, ...); `eof: true` ends the input. It "
            f"then waits (`wait_seconds`, default {SEND_WAIT_DEFAULT:g}, max 30) until the task ends, waits for input "
            "again (a REPL back at its prompt) or a line matches `wait_for` (an unfinished prompt line counts), and "
            "answers with what the task printed since this send (a tty echoes your text), its state, what it asks "
            "and the next call. Python REPL step: run(cmd=\"python3 -i\", stdin=\"tty\"), then send(id, "
            "text=\"len('abc')\") answers `3` at the prompt. A y/N prompt: send(id, text=\"y\"). At most 64 KiB a "
            "send: bigger input goes in a file you redirect. What the task does not read now is not sent (the "
            "answer says how much was)."
        ),
        input_schema=closed_object(
            {
                "id": id_schema,
                "text": {"type": "string", "maxLength": SEND_LIMIT,
                         "description": "What to type; Enter follows unless enter is false."},
                "keys": {"type": "array", "minItems": 1, "maxItems": MAX_KEYS, "items": {"type": "string"},
                         "description": f"Control keys pressed after text, in order (tty only): {LISTED}, "
                                        "ctrl-a..ctrl-z."},
                "enter": {"type": "boolean",
                          "description": "Press Enter after text (default true when text is given)."},
                "eof": {"type": "boolean",
                        "description": "End the input afterwards (a pipe is closed; a tty gets ctrl-d)."},
                "wait_seconds": {"type": "number", "minimum": 0,
                                 "description": "Seconds to wait for output "
                                                f"(default {SEND_WAIT_DEFAULT:g}, capped at 30)."},
                "wait_for": wait_for_schema | {
                    "description": "A Python regex: stop waiting at a new output line matching it, the unfinished "
                                   "last line (a prompt) included, e.g. \">>> $\"."},
            },
            required=("id",),
        ),
        file_route="redirect it into a task's input at its run (`cmd < /path/to/file`), or send a line that makes "
                   "the task read the file",
    )


def send_result(outcome: SendOutcome) -> ToolResult:
    view, task = outcome.view, outcome.view.task
    wrote = f"sent={outcome.accepted}B" if outcome.accepted == outcome.asked else \
        f"sent={outcome.accepted}B of {outcome.asked}B"
    lines = [f"{facts_line(view)} {wrote}{' eof' if outcome.eof else ''} waited={outcome.waited:.2f}s"]
    if outcome.closed is not None:
        lines.append(f"not sent: {outcome.closed}; nothing more can be sent to this task")
    elif outcome.accepted < outcome.asked:
        lines.append(f"only {outcome.accepted} of {outcome.asked} bytes were accepted: the task is not reading its "
                     "input now, and the rest was NOT sent (send it again later, or put big input in a file and "
                     "redirect it)")
    if view.asking is not None:
        lines.append(asking_text(task.id, view.asking))
    if outcome.wait_skipped:
        lines.append("(no wait: too many calls are waiting already)")
    if outcome.window.capped:
        lines.append(f"(wait_seconds={outcome.window.asked:g} was capped at {outcome.window.seconds:g})")
    if outcome.wait_for is not None:
        m = outcome.matched
        lines.append(f"wait_for matched ({m.stream} line {m.label}): {m.text}" if m is not None
                     else f"wait_for {outcome.wait_for!r}: nothing matched yet")
    if task.result and task.result.note:
        lines.append(f"note: {task.result.note}")
    if view.leftovers:
        lines.append(still_alive_line(task.id, view.leftovers))
    text = "\n".join(lines) + "\n" + outcome.output.text + _next_call(outcome)
    data = view.to_dict() | {
        "sent_bytes": outcome.accepted, "asked_bytes": outcome.asked, "eof": outcome.eof, "closed": outcome.closed,
        "output": outcome.output.data["streams"],
        "wait": {"asked": outcome.window.asked, "seconds": outcome.window.seconds, "capped": outcome.window.capped,
                 "waited": round(outcome.waited, 3), "skipped": outcome.wait_skipped},
    }
    if outcome.wait_for is not None:
        data["wait_for"] = {"pattern": outcome.wait_for, "matched": vars(outcome.matched) if outcome.matched else None}
    return ToolResult(text, data)


def _next_call(outcome: SendOutcome) -> str:
    task = outcome.view.task
    tid = task.id
    if task.terminal:
        return f"The task has ended; status(id=\"{tid}\") shows its whole output.\n"
    if outcome.closed is not None:
        return f"It still runs: status(id=\"{tid}\", wait_seconds=30) waits for its end; kill(id=\"{tid}\") stops it.\n"
    keys = 'keys: ["ctrl-c"] interrupts it' if task.stdin == "tty" else "eof: true ends its input"
    return (f"Next: send(id=\"{tid}\", text=\"...\") types the next line ({keys}); "
            f"status(id=\"{tid}\", new_only=true) shows later output; kill(id=\"{tid}\") stops it.\n")


def _answer_send(engine: Engine, args: SendArgs, ctx: CallContext) -> ToolResult:
    return send_result(engine.send(call=ctx, **args))


def send_tool(engine: Engine | None) -> Tool[SendArgs]:
    return Tool(handler=bound(engine, _answer_send), title="Type into a background task",
                **send_declaration(ID_SCHEMA, WAIT_FOR_SCHEMA))
