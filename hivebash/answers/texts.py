"""The text (and data) of what `run`, `status` and `kill` answer, from the snapshots of hivebash/answers/outcomes.py.

The model's first user rules: the facts line first; `cmd` and `cwd` in the first answer about a task and in
answers about an ended one, not in every poll; what `wait_for` found right under the facts, in every answer;
and each answer ends with what to do next when there is a next step.
"""

from __future__ import annotations

import time
from typing import Any

from common.facts import known_kv
from common.humanize import human_bytes, one_line
from common.notices import NO_SOCKET, Notices
from common.protocol.tools import ToolResult
from common.waiting import busy_advice
from hivebash import output_views as ov
from hivebash.answers.outcomes import KillOutcome, ManyOutcome, Outcome
from hivebash.processes.input_look import answer_step, asking_line
from hivebash.tasks import task as T
from hivebash.tasks.snapshot import TaskSnapshot
from hivebash.tasks.task import Task
from hivebash.tasks.todo_rules import still_alive_line, unsaved_line


def facts_line(view: TaskSnapshot) -> str:
    """The stable first line: id, status, exit code / signal, duration, resources."""
    t, r = view.task, view.task.result
    usage = r.rusage if r else None
    return known_kv(
        id=t.id, status=t.state, stdin=t.stdin if t.stdin != "null" else None,
        exit_code=r.exit_code if r else None, signal=r.signal or None if r else None,
        duration=f"{view.duration:.2f}s" if view.duration is not None else None,
        cpu=f"{usage.cpu_seconds:.2f}s" if usage else None,
        # Else the figure is the daemon's own peak, not the task's: left out.
        max_rss=human_bytes(usage.max_rss_bytes) if usage and usage.max_rss_exact else None,
        queue_position=view.queue_position or None, leftover_processes=len(view.leftovers) or None)


def _failure_block(view: TaskSnapshot) -> str:
    if not view.failures:
        return ""
    lines = [f"{x.stream}:{x.label}: {x.text}" for x in view.failures]
    return (f"--- lines above the tails that look like the failure ({ov.FAILURE_PATTERN[4:]}) ---\n"
            + "\n".join(lines) + "\n")


def stop_line(task: Task) -> str | None:
    """A stop sent to a task that still runs (a kill it may ignore, or its timeout's SIGTERM), and what next."""
    stop = task.stop
    if stop is None or task.terminal:
        return None
    ago = max(0.0, time.monotonic() - stop.asked_at)
    if stop.signal == "SIGINT":
        return f"SIGINT sent {ago:.1f}s ago; still running: kill(id=\"{task.id}\", force=true) sends SIGKILL"
    then = (f"; SIGKILL follows in {max(0.0, stop.deadline - time.monotonic()):.1f}s" if stop.deadline is not None
            else "")
    return f"{stop.signal} sent {ago:.1f}s ago; still running{then}"


def about_lines(view: TaskSnapshot, first_answer: bool) -> list[str]:
    """What the answer says about the task under its facts line."""
    t, r = view.task, view.task.result
    lines = [f"cmd: {one_line(t.cmd, 400)}", f"cwd: {t.cwd}"] if first_answer or t.terminal else []
    if t.timeout_secs:
        lines.append(f"timeout: {t.timeout_secs:g}s")
    if r and r.note:
        lines.append(f"note: {r.note}")
    passed = ov.passed_line(t.dropped)
    if passed:
        lines.append(passed)
    if t.output_pruned:
        lines.append(f"output: {t.output_pruned}; its files were emptied after its end")
    if view.leftovers:
        lines.append(still_alive_line(t.id, view.leftovers))
    stopping = stop_line(t)
    if stopping:
        lines.append(stopping)
    if view.unsaved is not None:
        lines.append(unsaved_line(view.unsaved))
    if view.asking is not None:
        lines.append(asking_text(t.id, view.asking))
    if t.state == T.PENDING:
        lines.append(f"queued: place {view.queue_position or '?'} in the queue; it starts when one of the daemon's "
                     f"running tasks (max_running) ends; kill(id=\"{t.id}\") cancels it")
    return lines


def asking_text(task_id: str, prompt: str) -> str:
    """`waiting for input: "Continue [y/N]? "` and the call that answers it."""
    return f"{asking_line(prompt)}; {answer_step(task_id)}"


def status_text(view: TaskSnapshot, extra_facts: str = "", matched: str = "", first_answer: bool = False) -> str:
    lines = [facts_line(view) + extra_facts, *about_lines(view, first_answer)]
    return ("\n".join(lines) + "\n" + matched + _failure_block(view) + (view.output.text if view.output else ""))


def matched_line(outcome: Outcome) -> str:
    """What `wait_for` found (or that it found nothing), with the call that waits on."""
    if outcome.wait_for is None:
        return ""
    cut = (f"(truncated while watched: {', '.join(outcome.truncated)}; watched again from its start)\n"
           if outcome.truncated else "")
    if outcome.matched is not None:
        m = outcome.matched
        return f"wait_for matched ({outcome.matched_id}, {m.stream} line {m.label}): {m.text}\n" + cut
    text = f"wait_for {outcome.wait_for!r}: no line you were not shown yet matched"
    if outcome.earlier is not None:
        e = outcome.earlier
        text += f"; {e.stream} line {e.label} matched earlier (shown before): {e.text}"
    task = outcome.view.task
    if not task.terminal or outcome.view.leftovers:
        text += (f"\nstill waiting: status(id=\"{task.id}\", wait_for={_quoted(outcome.wait_for)}, wait_seconds=30) "
                 "waits on")
    return text + "\n" + cut


def _quoted(text: str) -> str:
    import json
    return json.dumps(text)


def wait_facts(outcome: Outcome) -> tuple[str, dict[str, Any]]:
    w = outcome.window
    data = {"asked": w.asked, "seconds": w.seconds, "capped": w.capped, "waited": round(outcome.waited, 3),
            "skipped": outcome.wait_skipped}
    text = ""
    if w.capped:
        text += f" wait_capped={w.seconds:g}s(asked {w.asked:g}s)"
    if outcome.wait_skipped:
        text += " wait_skipped=busy"
    return text, data


FREE_A_SLOT = "kill tasks you no longer wait for"  # the bash daemon's way to end waits (common/waiting.py)
BUSY_ADVICE = f"(no inline wait: {busy_advice(FREE_A_SLOT, 'ask again')})\n"


def outcome_result(outcome: Outcome, started_form: bool, client_task: bool = False) -> ToolResult:
    """Full status when terminal (or not the run tool); else run's `task started: id=<id>` answer
    (`client_task`: what the model reads while its client tracks the task, hivebash/tools/client_tasks.py)."""
    view = outcome.view
    facts, wait = wait_facts(outcome)
    data = view.to_dict() | {"wait": wait}
    if outcome.wait_for is not None:
        data["wait_for"] = {"pattern": outcome.wait_for, "matched": vars(outcome.matched) if outcome.matched else None,
                            "earlier": vars(outcome.earlier) if outcome.earlier else None,
                            "truncated": outcome.truncated}
    busy = BUSY_ADVICE if outcome.wait_skipped else ""
    if started_form and not view.task.terminal:
        data["started"] = True
        then = client_task_step(view.task.id) if client_task else _next(view, outcome.notices)
        return ToolResult(_started_text(outcome, facts) + busy + then, data)
    if started_form:
        data["started"] = False
    return ToolResult(status_text(view, facts, matched_line(outcome), outcome.first_answer) + busy, data)


def _started_text(outcome: Outcome, facts: str) -> str:
    view = outcome.view
    task = view.task
    first = (f"task queued: id={task.id}" if task.state == T.PENDING else f"task started: id={task.id}")
    lines = [first, f"status={task.state} waited={outcome.waited:.2f}s{facts}", *about_lines(view, True)]
    if outcome.window.capped:
        lines.append(f"(wait_seconds={outcome.window.asked:g} was capped at {outcome.window.seconds:g})")
    out = view.output.text if view.output and task.state != T.PENDING else ""
    out = "".join(line for line in out.splitlines(True)
                  if not (line.startswith("--- ") and line.endswith(": empty ---\n")))
    files = f"output files: {view.stdout.path if view.stdout else ''} {view.stderr.path if view.stderr else ''}\n"
    step = input_step(task) if view.asking is None else ""  # (else its asking line says how to answer)
    return "\n".join(lines) + "\n" + matched_line(outcome) + out + files + step


def _next(view: TaskSnapshot, notices: Notices) -> str:
    if view.task.state == T.PENDING:
        return notices.say(
            "It runs once a slot frees; its completion will surface as a todo. "
            f"status(id=\"{view.task.id}\") checks it.\n",
            f"It runs once a slot frees. No completion notice will come ({NO_SOCKET}): check it with "
            f"status(id=\"{view.task.id}\", wait_seconds=30).\n")
    return next_step(view.task.id, notices)


def client_task_step(task_id: str) -> str:
    """What a `task started` answer says next to a model whose client tracks the task (the tasks extension)."""
    return (f"It keeps running as a background task of your client: its result arrives as a task notification when "
            f"it ends, and you can keep working meanwhile. status(id=\"{task_id}\") checks it; kill(id=\"{task_id}\") "
            "stops it.\n")


def input_step(task: Task) -> str:
    """How to type into a task that takes input (send.py)."""
    if task.stdin == "null":
        return ""
    keys = ', keys: ["ctrl-c"] presses keys' if task.stdin == "tty" else ", eof: true ends its input"
    return (f"It reads its input ({task.stdin}): send(id=\"{task.id}\", text=\"...\") types a line and answers with "
            f"what it printed{keys}.\n")


def next_step(task_id: str, notices: Notices) -> str:
    """What a `task started` answer tells the agent to do next: the promise of a todo only when one can come."""
    return notices.say(
        f"It keeps running; its completion will surface as a todo. status(id=\"{task_id}\") checks it.\n",
        f"It keeps running. No completion notice will come ({NO_SOCKET}): check it with "
        f"status(id=\"{task_id}\", wait_seconds=30).\n")


def _last_lines(view: TaskSnapshot) -> str:
    """An ended task's last few lines (status(ids)), indented under its line."""
    shown = []
    for stream, tail in (("stdout", view.stdout), ("stderr", view.stderr)):
        if tail is not None and tail.text:
            shown += [f"  {stream}| {line}" for line in tail.text.rstrip("\n").split("\n")]
    return "".join(line + "\n" for line in shown)


def many_result(outcome: ManyOutcome) -> ToolResult:
    """`status(ids=[...])`: one line per task (an ended one with its last lines), then how the wait went and
    the call that waits on for those still running."""
    facts, wait = wait_facts(outcome.first)
    text = ""
    for v in outcome.views:
        text += f"{facts_line(v)} cmd: {one_line(v.task.cmd, 60)}\n"
        if v.asking is not None:
            text += f"  {asking_text(v.task.id, v.asking)}\n"
        if v.task.terminal:
            text += _last_lines(v)
    ended = [v.task.id for v in outcome.views if v.task.terminal]
    running = [v.task.id for v in outcome.views if not v.task.terminal]
    just = [i for i in ended if i not in outcome.ended_before]
    summary = []
    if just:
        summary.append(f"ended during this call: {' '.join(just)}")
    if outcome.ended_before & set(ended):
        summary.append(f"ended before it: {' '.join(i for i in ended if i in outcome.ended_before)}")
    if running:
        ids = ", ".join(f'"{i}"' for i in running)
        summary.append(f"still running: {' '.join(running)}; status(ids=[{ids}], wait_seconds=30) waits for the next "
                       f"to end (all=true: for every one)" if len(running) > 1 else
                       f"still running: {running[0]}; status(id=\"{running[0]}\", wait_seconds=30) waits for it")
    else:
        summary.append("all ended; status(id=...) shows a task's output")
    busy = BUSY_ADVICE if outcome.first.wait_skipped else ""
    text += "; ".join(summary) + f"{facts}\n" + matched_line(outcome.first) + busy
    data = {"tasks": [v.to_dict() for v in outcome.views], "ended": ended, "running": running,
            "ended_before": sorted(outcome.ended_before), "all": outcome.every, "wait": wait}
    if outcome.first.wait_for is not None:
        data["wait_for"] = {"pattern": outcome.first.wait_for, "id": outcome.first.matched_id,
                            "matched": vars(outcome.first.matched) if outcome.first.matched else None,
                            "truncated": outcome.first.truncated}
    return ToolResult(text, data)


def kill_result(outcome: KillOutcome) -> ToolResult:
    view = outcome.view
    busy = " wait_skipped=busy" if outcome.wait_skipped else ""
    text = f"id={view.task.id} action={outcome.action} status={view.task.state}{busy}\n{outcome.message}\n"
    return ToolResult(text, view.to_dict() | {"action": outcome.action, "message": outcome.message,
                                              "wait_skipped": outcome.wait_skipped})
