"""What the subagent tools and todos say about a turn or a session: typed dicts (answers.py) and text, no I/O,
no lock.

The engine calls these under its condition for a running turn (a consistent snapshot) and without it for a
transcript read from disk.
"""

from __future__ import annotations

import glob
import time
from datetime import UTC, datetime
from typing import cast

from hivesubagent.answers.pages import excerpt, read_on
from hivesubagent.answers.place_texts import place_lines
from hivesubagent.answers.shapes import (
    Bounds,
    LastTurn,
    Outcome,
    OutcomeExtras,
    PlaceData,
    ProgressData,
    SessionView,
    TurnView,
    WorkData,
    WorktreeData,
)
from hivesubagent.answers.texts import work_lines
from hivesubagent.places.book import Place
from hivesubagent.transcripts.sessions import LiveSession, Transcript
from hivesubagent.turns import claude
from hivesubagent.turns import turn as T
from hivesubagent.turns.turn import Turn

OUTCOME_EXTRA_FIELDS = ("terminal_reason", "api_error_status", "num_turns")
# A turn stopped by one of its caps goes on with a higher one: the argument its todo's next call names.
RAISE_THE_CAP = {"budget_exceeded": ", max_budget_usd=...", "max_turns": ", max_turns=...",
                 "timed_out": ", timeout_minutes=..."}


def iso(wall: float | None) -> str | None:
    return None if wall is None else datetime.fromtimestamp(wall, UTC).isoformat(timespec="seconds")


def turn_view(turn: Turn, result_chars: int) -> TurnView:
    """A running or just-ended turn, as `start`, `continue`, `interrupt` and `status` answer it."""
    progress = turn.stream.progress.view()
    view: TurnView = {
        "name": turn.name,
        "state": turn.state,
        "running": turn.state != T.ENDED,
        "session_id": turn.session_id,
        "transcript": str(turn.transcript),
        "kind": turn.kind,
        "turn": turn.number,
        "pid": turn.pid,
        "model": turn.stream.model or turn.model,  # None: not known yet (claude's default, no init line)
        "started_at": iso(turn.started_wall),
        "elapsed_s": round(turn.elapsed(), 3),
        "confirmed": turn.stream.init_seen,
        "signals": dict(turn.sent),
        "turns_done": max(0, turn.number - 1),
        "total_cost_usd": turn.cost_before,  # claude records cost at a turn's end: this is up to the last one
        **bounds_data(turn),
        "progress": progress,
        "stall": stall_text(turn, progress),
    }
    if turn.place is not None:
        view.update(place_data(turn.place, turn.worktree_stat))
    if turn.outcome is not None:
        view["outcome"] = outcome_data(turn, result_chars)
    if turn.client_task:
        view["client_task"] = True
    return view


def place_data(place: Place, stat: WorktreeData | None) -> PlaceData:
    """Where a session runs (not --workdir, or with a worktree or options): its directory, its worktree (with
    what it holds, once measured) and the tool limits and effort in force."""
    data: PlaceData = {"cwd": str(place.cwd)}
    if place.worktree is not None:
        data["worktree"] = stat if stat is not None else cast(WorktreeData, place.worktree.as_dict())
    if place.options.as_dict():
        data["options"] = place.options.as_dict()
    return data


def stall_text(turn: Turn, progress: ProgressData) -> str | None:
    """"no event from claude for 12 min; last: tool Bash started 12 min ago" once the silence of a running turn
    passes the daemon's --stall-minutes; None before (or with no threshold)."""
    idle = progress["idle_s"]
    # The silence itself, not idle_s (rounded to 0.1 s): a threshold off that grid (--stall-minutes 0.012 is
    # 0.72 s) saw a rounded-down 0.7 s as no stall when the watch reported one, and its notice read None.
    silence = time.monotonic() - turn.stream.progress.last_event_mono
    if turn.stall_after_s is None or turn.state == T.ENDED or silence < turn.stall_after_s:
        return None
    return f"no event from claude for {ago(idle)}; last: {progress['last_event']} {ago(idle)} ago"


def ago(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def bounds_data(turn: Turn) -> Bounds:
    """The caps in force for the turn (each the caller's or the daemon's default; None: no cap)."""
    b = turn.bounds
    return {"max_budget_usd": b.budget_usd, "max_turns": b.max_turns, "timeout_minutes": b.timeout_minutes}


def outcome_data(turn: Turn, result_chars: int) -> Outcome:
    o = turn.outcome
    assert o is not None
    total_chars = max(len(o.result_text), turn.stream.result_chars if turn.stream.result else 0)
    start = excerpt(o.result_text, result_chars)
    return {
        "outcome": o.kind,
        "detail": o.detail,
        "exited_without_result": o.exited_without_result,
        "returncode": o.returncode,
        "result_text": start.text,
        "result_chars": total_chars,
        "result_next_offset": len(start.text) if len(start.text) < total_chars else None,
        "cost_usd": turn.turn_cost,
        "total_cost_usd": turn.total_cost,
        **bounds_data(turn),
        "duration_s": round(turn.elapsed(), 3),
        "work": turn.work,
        **outcome_extras(o, OUTCOME_EXTRA_FIELDS),
    }


def outcome_extras(o: claude.TurnEnd, fields: tuple[str, ...]) -> OutcomeExtras:
    """Those of `fields` that claude's result line carried, in the order it gave them."""
    return cast(OutcomeExtras, {k: v for k, v in o.extra.items() if k in fields})


def transcript_view(t: Transcript, name: str, result_chars: int, other: LiveSession | None, ours: Turn | None,
                    work: WorkData | None = None, place: Place | None = None,
                    stat: WorktreeData | None = None) -> SessionView:
    """A session that this daemon is not running, from its transcript (which carries `name`). `other`: a claude
    process this daemon did not start that runs it; `ours`: this engine's ended turn that wrote the transcript's last
    turn; `work`: what the last turn did (turns.work), when the caller read it; `place`: where it runs, when not
    --workdir with claude's defaults, and `stat` what its worktree holds, when measured."""
    last = t.last_turn
    view: SessionView = {
        "name": name,
        "state": "finished",
        "running": False,
        "session_id": t.session_id,
        "transcript": str(t.path),
        "model": t.model,
        "turns": t.turns,
        "total_cost_usd": t.cost_usd,
        "updated_at": iso(t.last_at or t.mtime),
    }
    if other is not None:
        # Not ours, but running: say so as continue does (which refuses it), with its pid.
        view["state"], view["running"] = "running", True
        view["pid"], view["started_by"] = other.pid, "another claude process, not this daemon"
    if place is not None:
        view.update(place_data(place, stat))
    if last is not None:
        start = excerpt(last.result_text, result_chars)
        last_turn: LastTurn = {
            "outcome": "interrupted" if last.outcome == "no_result" else last.outcome,
            "exited_without_result": last.outcome == "no_result",
            "result_text": start.text,
            "result_chars": start.total_chars,
            "result_next_offset": start.next_offset,
            "cost_usd": last.cost_usd,
            "duration_s": None if last.duration_seconds is None else round(last.duration_seconds, 3),
            "started_at": iso(last.started_at),
            "work": work,
        }
        view["last_turn"] = last_turn
        if ours is not None and other is None and ours.outcome is not None:
            o = ours.outcome
            last_turn.update({"outcome": o.kind, "detail": o.detail, "exited_without_result": o.exited_without_result})
            last_turn.update(bounds_data(ours))
            last_turn.update({"cost_usd": ours.turn_cost, "work": ours.work or work})
            last_turn.update(outcome_extras(o, ("terminal_reason", "api_error_status")))
    return view


def wrote_no_transcript(turn: Turn) -> bool:
    """Whether the turn was a start whose claude ended before it wrote its transcript: no session exists to show
    or continue (one archived since was written)."""
    path = turn.transcript
    if turn.kind != "start" or path.exists():  # (most ends: one stat)
        return False
    return next(path.parent.glob(f"{glob.escape(path.name)}.*archived"), None) is None


def turn_todo(turn: Turn, view: TurnView) -> tuple[str, str]:
    """The summary and body of a finished turn's one todo (its data is `view`): outcome, the start of the
    result, cost, how to go on."""
    o = view["outcome"]  # a todo is made for an ended turn, whose view has its outcome
    cost = ", cost unknown" if o["cost_usd"] is None else f", ${o['cost_usd']:.4f}"
    summary = f"subagent {turn.name}: turn {turn.number} {o['outcome']}{cost}"
    facts = (
        f"outcome={o['outcome']} name={turn.name} session_id={turn.session_id} turn={turn.number} "
        f"cost_usd={_num(o['cost_usd'])} total_cost_usd={_num(o['total_cost_usd'])} duration_s={o['duration_s']:.1f}"
    )
    if turn.budget_usd is not None:
        facts += f" max_budget_usd={claude.format_usd(turn.budget_usd)}"
    if turn.bounds.max_turns is not None:
        facts += f" max_turns={turn.bounds.max_turns}"
    if turn.bounds.timeout_minutes is not None:
        facts += f" timeout_minutes={turn.bounds.timeout_minutes:g}"
    lines = [facts, f"detail: {o['detail']}", *work_lines(o["work"]), *place_lines(view)]
    if o["result_text"]:
        shown = len(o["result_text"])
        lines += [f"result ({shown} of {o['result_chars']} characters):" if o["result_next_offset"] else "result:",
                  o["result_text"]]
        if o["result_next_offset"]:
            lines.append(read_on(turn.name, o["result_next_offset"], o["result_chars"]))
    more = RAISE_THE_CAP.get(o["outcome"], "")
    if wrote_no_transcript(turn):
        lines += ["", "next: claude ended before it wrote a transcript, so there is no session to continue; "
                      f'start(name="{turn.name}", ...) begins it again.']
    else:
        lines += [
            "",
            f'next: continue(name="{turn.name}", prompt="..."{more}) gives it another turn; '
            f'start(name="{turn.name}", ...) archives this session and starts afresh.',
            f"transcript: Read({turn.transcript})",
        ]
    return summary, "\n".join(lines)


def _num(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.6f}"
