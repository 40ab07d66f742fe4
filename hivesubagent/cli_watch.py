"""Watching turns from a shell: `hive-subagent top` (the running turns as a live table: steps, tool calls,
tokens, cost, the last tool, how long claude has been quiet; and the daemon's calls in flight) and
`hive-subagent log NAME` (a session's transcript as readable turns; `-f` follows a running turn, printing
each step as claude writes it, until the daemon says the turn ended)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from common.cli_base import EXIT_REFUSED, DaemonClient, fail, frame_options
from common.humanize import human_age
from common.live_table import calls_in_flight, in_flight_line, run_frames, table
from hivesubagent.transcripts.log import as_data, read_turns, render
from hivesubagent.transcripts.sessions import SessionStore

FOLLOW_POLL = 0.5  # seconds between looks at a followed transcript
TOOL_CHARS = 40


def top_frame(client: DaemonClient) -> dict[str, Any]:
    """The running turns as status() shows them, and the calls in flight."""
    data = client.call("status", {}).data
    turns = []
    for s in data.get("sessions", []):
        if not s.get("running") or "progress" not in s:
            continue  # not running, or running in a claude this daemon did not start
        p = s["progress"]
        turns.append({"name": s["name"], "turn": s["turn"], "kind": s["kind"], "elapsed_s": s["elapsed_s"],
                      "pid": s.get("pid"), "steps": p["steps"], "tool_calls": p["tool_calls"],
                      "input_tokens": p["input_tokens"], "output_tokens": p["output_tokens"],
                      "cost_usd_ended_turns": s.get("total_cost_usd"), "latest_tool": p["latest_tool"],
                      "latest_tool_input": p["latest_tool_input"], "idle_s": p["idle_s"], "stall": s.get("stall")})
    return {"url": client.url, "time": time.strftime("%H:%M:%S"), "running": len(turns),
            "sessions": len(data.get("sessions", [])) + int(data.get("more", 0)), "turns": turns,
            "calls_in_flight": calls_in_flight(client.url, client.token, "hive_subagent")}


def _token_count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def render_top(frame: dict[str, Any]) -> str:
    head = (f"hive-subagent top  {frame['url']}  {frame['time']}  running {frame['running']} of "
            f"{frame['sessions']} session(s)")
    if not frame["turns"]:
        return f"{head}\n{in_flight_line(frame['calls_in_flight'])}\n(no running turns)"
    rows = []
    for t in frame["turns"]:
        tool = t["latest_tool"] or "-"
        if t["latest_tool_input"]:
            tool = f"{tool} {t['latest_tool_input']}".replace("\n", " ")
        cost = t["cost_usd_ended_turns"]
        rows.append([t["name"], f"{t['turn']} ({t['kind']})", human_age(t["elapsed_s"]), str(t["steps"]),
                     str(t["tool_calls"]), _token_count(t["input_tokens"]), _token_count(t["output_tokens"]),
                     "-" if cost is None else f"${cost:.2f}", human_age(t["idle_s"]),
                     "STALLED" if t["stall"] else "",
                     tool if len(tool) <= TOOL_CHARS else tool[:TOOL_CHARS - 1] + "…"])
    body = table(["NAME", "TURN", "AGE", "STEPS", "TOOLS", "IN TOK", "OUT TOK", "COST", "QUIET", "STALL",
                  "LAST TOOL"], rows, right=frozenset({2, 3, 4, 5, 6, 7, 8}))
    return (f"{head}\n{in_flight_line(frame['calls_in_flight'])}\n\n{body}\n"
            "(COST: the session's ended turns; a running turn's cost comes with its end)")


@click.command("top")
@frame_options("Print one frame and exit.")
@click.pass_obj
def top_command(client: DaemonClient, once: bool, interval: float, as_json: bool) -> None:
    """A live table of the running turns: steps, tool calls, tokens so far, cost, the last tool, how long
    claude has written nothing; and the calls the daemon is answering now.

    \b
    hive-subagent top                refresh every 2 s until Ctrl-C
    hive-subagent top --once --json  one frame as JSON (--json alone: one object a line)"""
    run_frames(lambda: top_frame(client), render_top, once=once, as_json=as_json, interval=interval, echo=click.echo)


def show_log(store: SessionStore, name: str, last: int | None, as_json: bool, follow: bool,
             client: DaemonClient) -> None:
    """`hive-subagent log NAME`: the transcript's turns (the last `last`); `follow`: then each new line of
    it as claude writes it, until the daemon says the session's turn is not running."""
    path = _transcript(store, name)
    turns = read_turns(path)
    if last is not None:
        turns = turns[-last:]
    if as_json and not follow:
        click.echo(json.dumps({"name": name, "transcript": str(path), "turns": as_data(turns)}, indent=2))
        return
    if as_json:
        raise click.UsageError("--follow prints readable turns; --json shows the transcript as it is now")
    click.echo(f"session {name} ({path})\n")
    shown = render(turns).splitlines()
    click.echo("\n".join(shown))
    if follow:
        _follow(store, name, last, shown, client)


def _transcript(store: SessionStore, name: str) -> Path:
    paths = store.find_all(name)
    if not paths:
        fail("hive-subagent", f"no session named {name!r} in {store.project_dir}", EXIT_REFUSED)
    return paths[0]


def _follow(store: SessionStore, name: str, last: int | None, shown: list[str], client: DaemonClient) -> None:
    """Print what the transcript gains; a line already shown that changed is shown again from there on."""
    try:
        while True:
            running = client.call("status", {"name": name}).data.get("running", False)
            turns = read_turns(_transcript(store, name))
            lines = render(turns[-last:] if last is not None else turns).splitlines()
            same = next((i for i, (a, b) in enumerate(zip(shown, lines, strict=False)) if a != b),
                        min(len(shown), len(lines)))
            if lines[same:]:
                click.echo("\n".join(lines[same:]))
            shown = lines
            if not running:
                click.echo(f"(the turn of {name} is not running: end of the log)")
                return
            time.sleep(FOLLOW_POLL)
    except KeyboardInterrupt:
        return
