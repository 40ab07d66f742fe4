"""`list`'s answer: a table of tasks, newest first, bounded like every answer (under 8 KiB), with the count
left and the call that shows the next page."""

from __future__ import annotations

import time

from common.humanize import human_age, one_line
from common.protocol.tools import ToolResult
from hivebash.answers.texts import asking_text, stop_line
from hivebash.tasks.snapshot import TaskSnapshot

LIST_TEXT_BYTES = 6 * 1024  # the table's bytes; with the notes under it the answer stays under 8 KiB
COMMAND_CHARS = 60
STOP_LINES = 5  # tasks marked ! (a stop sent, still running) explained under the table
ASKING_LINES = 3  # tasks marked ? (waiting for input) explained under it, their prompts cut to PROMPT_CHARS
PROMPT_CHARS = 40


def _row(v: TaskSnapshot, now: float) -> dict:
    r = v.task.result
    return {"id": v.task.id, "status": v.task.state, "age_seconds": round(now - v.task.submitted_at, 1),
            "exit_code": r.exit_code if r else None, "signal": r.signal if r else None,
            "duration": None if v.duration is None else round(v.duration, 3), "cmd": one_line(v.task.cmd, 200),
            "stdin": v.task.stdin, "leftover_processes": len(v.leftovers), "seq": v.task.seq,
            "stop": stop_line(v.task), "waiting_for_input": v.asking,
            **({"client_task": True} if v.task.client_handle else {})}


def list_result(views: list[TaskSnapshot], total: int, state: str | None, offset: int = 0) -> ToolResult:
    """`views`: the page asked for (from `offset` in the newest-first order of the `total` matching tasks)."""
    now = time.time()
    rows = [_row(v, now) for v in views]
    head = f"tasks={total}" + (f" state={state}" if state else "")
    if not rows:
        return ToolResult(head + " shown=0\n(no tasks" + (" past that offset" if offset else "") + ")\n",
                          {"total": total, "offset": offset, "tasks": []})
    width = max(len("ID"), *(len(r["id"]) for r in rows))
    inputs = any(r["stdin"] != "null" for r in rows)  # a STDIN column only when some task takes input
    lines = [f"{'ID':<{width}}  {'STATUS':<11}  {'AGE':>5}  {'EXIT':>4}  " + ("STDIN " if inputs else "") + "COMMAND"]
    used, shown = len(head) + 80 + len(lines[0]), 0
    for r in rows:
        code = "-" if r["exit_code"] is None else str(r["exit_code"])
        stdin = (f"{'-' if r['stdin'] == 'null' else r['stdin']:<5} " if inputs else "")
        status = r["status"] + (f"+{r['leftover_processes']}" if r["leftover_processes"] else "")
        status += "!" if r["stop"] else ""
        status += "~" if r.get("client_task") else ""
        status += "?" if r["waiting_for_input"] is not None else ""
        line = (f"{r['id']:<{width}}  {status:<11}  {human_age(r['age_seconds']):>5}  {code:>4}  "
                f"{stdin}{one_line(r['cmd'], COMMAND_CHARS)}")
        if used + len(line.encode()) + 1 > LIST_TEXT_BYTES:
            break
        lines.append(line)
        used += len(line.encode()) + 1
        shown += 1
    text = f"{head} shown={shown}" + (f" from offset {offset}" if offset else "") + "\n" + "\n".join(lines) + "\n"
    text += _notes(rows[:shown])
    left = total - offset - shown
    if left > 0:
        filt = f'state="{state}", ' if state else ""
        text += (f"{left:,} more: list({filt}offset={offset + shown}) shows the next page; "
                 f"a state filter narrows it\n")
    for r in rows:
        del r["seq"]
    return ToolResult(text, {"total": total, "offset": offset, "shown": shown, "tasks": rows[:shown]})


def _notes(shown_rows: list[dict]) -> str:
    """What the marks of the rows shown mean: a stop sent (!), a wait for input (?), an MCP client's task (~),
    leftovers (+N)."""
    text = ""
    stopped = [r for r in shown_rows if r["stop"]]
    for r in stopped[:STOP_LINES]:
        text += f"{r['id']}!: {r['stop']}\n"
    if len(stopped) > STOP_LINES:
        text += (f"({len(stopped) - STOP_LINES} more marked !: a stop was sent and they still run; "
                 "status(id) says which)\n")
    asking = [r for r in shown_rows if r["waiting_for_input"] is not None]
    for r in asking[:ASKING_LINES]:
        text += f"{r['id']}?: {asking_text(r['id'], _cut(r['waiting_for_input']))}\n"
    if len(asking) > ASKING_LINES:
        text += f"({len(asking) - ASKING_LINES} more marked ?: they wait for input; status(id) shows what they ask)\n"
    if any(r.get("client_task") for r in shown_rows):
        text += "(~: an MCP client tracks it as one of its background tasks; its end reaches the model through it)\n"
    if any(r["leftover_processes"] for r in shown_rows):
        text += "(+N: the shell exited, N processes it started still run; kill(id) stops them)\n"
    return text


def _cut(prompt: str) -> str:
    """A prompt cut to PROMPT_CHARS, keeping its end (where the question is) and its spacing."""
    return prompt if len(prompt) <= PROMPT_CHARS else "…" + prompt[-(PROMPT_CHARS - 1):]
