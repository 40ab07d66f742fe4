"""What the subagent tools answer, as text for the model: a first line of stable key=value facts, then the
readable rest, each answer bounded under 8 KiB. The data beside it is the view itself (tools.py)."""

from __future__ import annotations

import json
from typing import Any, cast

from common.facts import known, kv
from common.notices import NO_SOCKET, Notices
from common.protocol.tools import ToolResult
from common.waiting import SLOTS_TAKEN, busy_advice, retry_advice
from hivesubagent.answers.pages import read_on
from hivesubagent.answers.place_texts import place_facts, place_lines
from hivesubagent.answers.shapes import (
    LastTurn,
    Outcome,
    ProgressData,
    SessionAnswer,
    SessionList,
    Steps,
    StopWait,
    TurnView,
    WaitedSessions,
    WaitFacts,
    WorkData,
)

FREE_A_SLOT = "interrupt the turns you no longer wait for"  # this daemon's way to end waits (common/waiting.py)

LIST_TEXT_BYTES = 7 * 1024  # status() of every session: the lines that fit; an answer the model reads stays < 8 KiB


def _or_none(offset: int | None) -> int | str:
    return "none" if offset is None else offset


def work_lines(work: WorkData | None) -> list[str]:
    """What a turn did, in two lines: the files it wrote or edited, the commands it ran (the last three)."""
    if work is None:
        return ["files changed: unknown (the transcript could not be read); commands run: unknown"]
    files = "none"
    if work["files_changed"]:
        more = f", and {work['files_more']} more" if work["files_more"] else ""
        files = f"{work['files_changed']} ({', '.join(work['files'])}{more})"
    commands = "none"
    if work["commands_run"]:
        commands = f"{work['commands_run']}; last: " + " | ".join(f"`{c}`" for c in work["last_commands"])
    return [f"files changed: {files}", f"commands run: {commands}"]


def _bounds(view: TurnView | Outcome | LastTurn, known_only: bool = True) -> dict[str, Any]:
    """The turn's caps as facts: those that are set, or (`known_only=False`) all three, None for no cap."""
    caps = {"max_budget_usd": view.get("max_budget_usd"), "max_turns": view.get("max_turns"),
            "timeout_minutes": _minutes(view.get("timeout_minutes"))}
    return known(**caps) if known_only else caps


def _minutes(value: float | None) -> str | None:
    return None if value is None else f"{value:g}"


def _result_lines(name: str, text: str, total: int, next_offset: int | None, label: str) -> list[str]:
    if not text:
        return []
    head = f"{label} ({len(text)} of {total} characters):" if next_offset is not None else f"{label}:"
    return [head, text] + ([read_on(name, next_offset, total)] if next_offset is not None else [])


def turn_result(view: TurnView, verb: str, notices: Notices) -> ToolResult:
    """A start/continue/interrupt answer: running (with how to follow it) or, if it already ended, its outcome."""
    name = view["name"]
    if "outcome" in view:
        o = view["outcome"]
        first = kv(state="ended", name=name, outcome=o["outcome"], session_id=view["session_id"], turn=view["turn"],
                   cost_usd=o["cost_usd"], total_cost_usd=o["total_cost_usd"], duration_s=o["duration_s"],
                   **_bounds(o))
        lines = [first, f"detail: {o['detail']}"]
        if "work" in o:
            lines += work_lines(o["work"])
        lines += place_lines(view)
        lines += _result_lines(name, o["result_text"], o["result_chars"], o.get("result_next_offset"), "result")
        lines.append(f"transcript: {view['transcript']}")
        failed = verb != "interrupted" and o["outcome"] in ("error",)
        return ToolResult(text="\n".join(lines), data=view, is_error=failed)
    caps = {k: "none" if v is None else v for k, v in _bounds(view, known_only=False).items()}
    first = kv(state=view["state"], name=name, session_id=view["session_id"], turn=view["turn"], pid=view["pid"],
               **known(model=view.get("model")), **caps)
    lines = [first, *place_lines(view)]
    wait = f'status(name="{name}", wait_seconds=30)'
    if "wait" in view:
        lines[0] += " " + kv(**_stop_wait_facts(view["wait"]))
        lines += _not_ended_yet(view, view["wait"], wait, notices)
    else:
        if view.get("archived"):
            lines.append("archived the earlier session(s) of this name: " + ", ".join(view["archived"]))
        ending = notices.say("When the turn ends you get a todo with its outcome",
                             f"No notice comes when it ends ({NO_SOCKET})")
        lines.append(f"{verb} in the background. {ending}; {wait} waits for the end, status(name=\"{name}\") shows "
                     f'its progress, interrupt(name="{name}") stops it.')
    lines.append(f"transcript: {view['transcript']}")
    return ToolResult(text="\n".join(lines), data=view)


def _stop_wait_facts(wait: StopWait) -> dict[str, Any]:
    return {"waited_s": wait["waited"], **({"wait_skipped": "busy"} if wait["skipped"] else {})}


def _not_ended_yet(view: TurnView, wait: StopWait, again: str, notices: Notices) -> list[str]:
    """An interrupt answered before the turn ended: the signals sent, why it did not wait longer, the SIGKILL
    still due, and the one call to make (interrupt again would only send what was sent)."""
    sent = ", ".join(f"{k} ({v})" for k, v in view["signals"].items())
    if wait["skipped"]:
        why = f"this call did not wait for its end: {SLOTS_TAKEN}"
        later = f" ({retry_advice(FREE_A_SLOT)})"
    else:
        why, later = f"it had not ended after waiting {wait['waited']:.1f}s", ""
    lines = [f"signals sent: {sent}; the turn is still running: {why}."]
    if wait["kill_grace"] is not None and "SIGKILL" not in view["signals"]:
        lines.append(f"SIGKILL follows if it is still running {wait['kill_grace']:g}s after the SIGINT; "
                     f'interrupt(name="{view["name"]}", force=true) sends it now.')
    lines.append(notices.say(f"Its outcome arrives as a todo; {again} waits for it{later}.",
                             f"Next: {again} waits for its outcome{later}."))
    return lines


def _progress_line(p: ProgressData) -> str:
    tools = ", ".join(f"{n} x{c}" for n, c in list(p["tools"].items())[:8]) or "none yet"
    line = (f"progress: {p['steps']} step(s), {p['tool_calls']} tool call(s) ({tools}); "
            f"last event {p['idle_s']:.1f}s ago")
    if p.get("input_tokens") is not None:
        line += f"; tokens so far (as claude reported them) in={p['input_tokens']} out={p['output_tokens']}"
    if p.get("latest_tool"):
        line += f"\nlatest tool call: {p['latest_tool']}: {p['latest_tool_input']}"
    return line


def render_session(view: SessionAnswer) -> str:
    name = view["name"]
    if "turn" in view:  # a turn this daemon runs (its view is taken only while it runs)
        first = kv(name=name, state=view["state"], running=True, session_id=view["session_id"], turn=view["turn"],
                   pid=view["pid"], elapsed_s=view["elapsed_s"],
                   **known(model=view.get("model")), **_bounds(view), **known(client_task=view.get("client_task")))
        lines = [first, _progress_line(view["progress"]), f"started_at: {view['started_at']}",
                 f"transcript: {view['transcript']}", *place_lines(view)]
        if view.get("turns_done"):
            lines.append(f"earlier turns: {view['turns_done']}, costing "
                         f"{kv(total_cost_usd=view['total_cost_usd']).split('=', 1)[1]} USD in all "
                         "(claude reports a turn's cost when it ends)")
        if view["signals"]:
            lines.append("signals sent: " + ", ".join(f"{k} ({v})" for k, v in view["signals"].items()))
        if view.get("stall"):
            lines.append(f"stalled: {view['stall']}; interrupt(name=\"{name}\") stops it")
        return "\n".join(lines)
    last = view.get("last_turn") or cast(LastTurn, {})
    first = kv(name=name, state=view["state"], running=view["running"], session_id=view["session_id"],
               turns=view["turns"], **known(pid=view.get("pid"), model=view.get("model")),
               last_outcome=last.get("outcome"), last_cost_usd=last.get("cost_usd"),
               total_cost_usd=view["total_cost_usd"], last_duration_s=last.get("duration_s"), **_bounds(last))
    lines = [first, f"updated_at: {view['updated_at']}", f"transcript: {view['transcript']}"]
    if view.get("started_by"):
        lines.append(f"running in pid {view['pid']}, {view['started_by']}: continue and start refuse it until it exits")
    if last.get("detail"):
        lines.append(f"detail: {last['detail']}")
    if last.get("exited_without_result"):
        lines.append("the last turn ended without a result (interrupted, killed or crashed)")
    if "work" in last:
        lines += work_lines(last["work"])
    lines += place_lines(view)
    result_page = view.get("result_page")
    if result_page is not None:
        lines.append(kv(result_offset=result_page["offset"], chars=result_page["chars"],
                        total_chars=result_page["total_chars"], next_offset=_or_none(result_page["next_offset"])))
        lines.append(result_page["text"])
        lines.append(read_on(name, result_page["next_offset"], result_page["total_chars"]) or "(end of the result)")
    else:
        lines += _result_lines(name, last.get("result_text") or "", last.get("result_chars") or 0,
                               last.get("result_next_offset"), "last result")
    return "\n".join(lines)


def _session_line(s: SessionAnswer) -> str:
    """One session in a line: a running turn's progress, or a finished session's last outcome."""
    if "turn" in s:
        p = s["progress"]
        return kv(name=s["name"], state=s["state"], session_id=s["session_id"], turn=s["turn"],
                  elapsed_s=s["elapsed_s"], steps=p["steps"], tool_calls=p["tool_calls"], idle_s=p["idle_s"],
                  **known(stalled=s.get("stall") and True, client_task=s.get("client_task")), **place_facts(s))
    last = s.get("last_turn") or cast(LastTurn, {})
    work = last.get("work") or cast(WorkData, {})
    return kv(name=s["name"], state=s["state"], session_id=s["session_id"], turns=s["turns"], **known(pid=s.get("pid")),
              last_outcome=last.get("outcome"), total_cost_usd=s["total_cost_usd"], updated_at=s["updated_at"],
              **known(files_changed=work.get("files_changed"), commands_run=work.get("commands_run")), **place_facts(s))


def _wait_facts(wait: WaitFacts) -> dict[str, Any]:
    facts: dict[str, Any] = {"waited_s": wait["waited"]}
    if wait["capped"]:
        facts["wait_capped_s"] = f"{wait['seconds']:g}"
    if wait["skipped"]:
        facts["wait_skipped"] = "busy"
    return facts


def _busy_note(call: str) -> str:
    return f"(no inline wait: {busy_advice(FREE_A_SLOT, call + ' tries again')})"


def render_waited(view: SessionAnswer, wait: WaitFacts) -> str:
    """`status(name, wait_seconds=N)`: the session as status shows it, then how the wait went and what next."""
    name = view["name"]
    again = f'status(name="{name}", wait_seconds=30)'
    if "started_by" in view:
        note = f"run by {view['started_by']}: this daemon cannot wait for it"
    elif wait["skipped"]:
        note = _busy_note(again)
    elif view.get("running"):
        note = (f"still running after waiting {wait['waited']:.1f}s: {again} waits again; "
                f"interrupt(name=\"{name}\") stops it")
    elif wait["ended"]:
        note = f"the turn ended during the wait ({wait['waited']:.1f}s)"
    else:
        note = "not running: nothing to wait for"
    return render_session(view) + "\n" + kv(**_wait_facts(wait)) + " " + note


def render_many(data: WaitedSessions) -> str:
    """`status(names=[...])`: a line per session, which ended during the wait, and the call for the rest."""
    sessions, wait = data["sessions"], data["wait"]
    running = [s["name"] for s in sessions if "turn" in s]
    first = kv(sessions=len(sessions), running=len(running), ended_during_wait=len(wait["ended"]),
               wait="all" if wait["all"] else "first", **_wait_facts(wait))
    lines = [first] + [_session_line(s) for s in sessions]
    if wait["ended"]:
        shows = ", ".join(f'status(name="{n}")' for n in wait["ended"])
        lines.append(f"ended during the wait: {', '.join(wait['ended'])}; {shows} shows the outcome and result")
    if running:
        listed = ", ".join(json.dumps(n) for n in running)
        again = f"status(names=[{listed}], wait_seconds=30{', all=true' if wait['all'] else ''})"
        lines.append(_busy_note(again) if wait["skipped"]
                     else f"still running: {', '.join(running)}; next: {again} waits for "
                     + ("every one" if wait["all"] else "the first of them"))
    else:
        lines.append("none is running now")
    return _within(lines, LIST_TEXT_BYTES)


def render_list(data: SessionList) -> str:
    sessions = data["sessions"]
    lines = [kv(sessions=len(sessions), running=data["running"], more=data["more"])]
    lines += [_session_line(s) for s in sessions]
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


def render_steps(data: Steps) -> str:
    """`status(name, steps=true)`: a page of the last turn's steps, then the call that reads on."""
    name, got = data["name"], data["steps_page"]
    first = kv(name=name, running=data["running"], turn=data["turn"], steps_offset=got["offset"], chars=got["chars"],
               total_chars=got["total_chars"], next_offset=_or_none(got["next_offset"]))
    if got["next_offset"] is None:
        end = "(end of the steps" + ("; the turn is still running: call again for more)" if data["running"] else ")")
    else:
        end = (f'{got["total_chars"] - got["next_offset"]} more characters: status(name="{name}", steps=true, '
               f'steps_offset={got["next_offset"]}) reads on')
    return "\n".join([first, got["text"], end])

