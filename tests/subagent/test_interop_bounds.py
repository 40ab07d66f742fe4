"""A turn bounded in model calls and in time, against the REAL claude CLI (2.1.328) and the Messages API mock:
`max_turns` is claude's own `--max-turns` (hidden from its --help), `timeout_minutes` the daemon's timer."""

from __future__ import annotations

import json

import pytest

from hivesubagent.errors import SubagentError
from hivesubagent.tools import build_registry

pytestmark = pytest.mark.interop

TOOL = 'MOCK:tool=Bash {"command": "echo bounded-tool-ran"}'


def test_max_turns_stops_the_turn_after_its_last_calls_tools(engine_factory, claude_bin, real_env,
                                                             prompt_file, mock_api):
    engine, todos = engine_factory(claude_bin, real_env)
    tools = build_registry(engine)
    started = tools.call("start", {"name": "capped", "prompt_file": str(prompt_file), "trigger": f"capped-1\n{TOOL}",
                                   "max_turns": 1})
    assert not started.is_error and "max_turns=1" in started.text.splitlines()[0], started.text
    todo = todos.wait_upserts("capped")[0]
    outcome = todo["data"]["outcome"]
    # claude 2.1.328: the one model call's tool ran, the next call was never made; rc 1, error_max_turns
    assert outcome["outcome"] == "max_turns" and outcome["terminal_reason"] == "max_turns", outcome
    assert outcome["detail"] == "claude stopped at its turn limit: Reached maximum number of turns (1)"
    assert outcome["returncode"] == 1 and outcome["max_turns"] == 1 and outcome["cost_usd"] > 0
    assert len([r for r in mock_api.message_requests() if "capped-1" in json.dumps(r.body.get("messages"))]) == 1
    assert todo["summary"].startswith("subagent capped: turn 1 max_turns")
    assert "max_turns=1" in todo["body"].splitlines()[0] and "max_turns=...) gives it another turn" in todo["body"]
    status = tools.call("status", {"name": "capped"})
    assert status.data["last_turn"]["outcome"] == "max_turns" and "last_outcome=max_turns" in status.text
    # a new turn with a higher cap goes on where it stopped (the default cap, 200, is named when none is given)
    cont = tools.call("continue", {"name": "capped", "prompt": "capped-2 MOCK:reply=finished now"})
    assert "max_turns=200" in cont.text.splitlines()[0]
    assert todos.wait_upserts("capped", 2)[1]["data"]["outcome"]["outcome"] == "completed"


def test_a_turn_past_its_time_ends_timed_out(engine_factory, claude_bin, real_env, prompt_file, mock_api):
    # the knob in seconds (the default of every turn), and a turn's own timeout_minutes beside it
    engine, todos = engine_factory(claude_bin, real_env, turn_timeout=2.0)
    tools = build_registry(engine)
    by_knob = tools.call("start",
                         {"name": "slow-knob", "prompt_file": str(prompt_file), "trigger": "knob-1 MOCK:hold=knob"})
    own = tools.call("start", {"name": "slow-own", "prompt_file": str(prompt_file), "trigger": "own-1 MOCK:hold=own",
                               "timeout_minutes": 0.04})
    assert "timeout_minutes=0.033" in by_knob.text.splitlines()[0]
    assert "timeout_minutes=0.04" in own.text.splitlines()[0]
    for name, minutes in (("slow-knob", "0.033"), ("slow-own", "0.04")):
        todo = todos.wait_upserts(name, seconds=60)[0]
        outcome = todo["data"]["outcome"]
        assert outcome["outcome"] == "timed_out", outcome
        assert outcome["detail"].startswith(f"reached its time limit ({minutes} min): stopped by SIGINT "
                                            f"(timeout_minutes={minutes})")
        assert f"timeout_minutes={minutes}" in todo["body"].splitlines()[0]
        try:
            last = engine.status(name)["last_turn"]["outcome"]
        except SubagentError as exc:  # stopped before claude wrote its transcript (a loaded machine): said so
            assert f"its turn 1 ended (timed_out: reached its time limit ({minutes} min)" in str(exc), exc
        else:
            assert last == "timed_out"
    mock_api.release("knob")
    mock_api.release("own")


def test_a_claude_whose_api_stops_answering_is_shown_stalled(engine_factory, claude_bin, real_env,
                                                             prompt_file, mock_api):
    # 0.03 min = 1.8 s of silence; the mock holds the reply (after message_start: claude writes no event)
    engine, todos = engine_factory(claude_bin, real_env, stall_minutes=0.03)
    tools = build_registry(engine)
    engine.start("quiet", str(prompt_file), trigger="quiet-1 MOCK:hold=quiet\nMOCK:reply=spoke at last")
    notice = todos.wait_upserts("quiet", seconds=60)[0]
    assert notice["summary"].startswith("subagent quiet: turn 1 stalled, no event from claude for "), notice["summary"]
    first = notice["body"].splitlines()[0]
    assert first.startswith("no event from claude for ") and "; last: " in first and first.endswith(" ago")
    assert "nothing is stopped" in notice["body"] and notice["data"]["running"] is True
    status = tools.call("status", {"name": "quiet"})
    assert status.data["running"] is True and status.data["stall"].startswith("no event from claude for ")
    assert any(line.startswith("stalled: no event from claude for ") for line in status.text.splitlines())
    assert "stalled=true" in tools.call("status", {}).text
    mock_api.release("quiet")
    done = todos.wait_upserts("quiet", 2)[1]
    assert done["data"]["outcome"]["outcome"] == "completed"
    assert done["data"]["outcome"]["result_text"] == "spoke at last"
    # the stall's todo went when claude wrote again; the outcome replaced it
    assert [c[0] for c in todos.for_key("quiet")] == ["clear", "upsert", "clear", "upsert"]


def test_a_stall_interrupts_only_when_the_knob_says_so(engine_factory, claude_bin, real_env, prompt_file, mock_api):
    engine, todos = engine_factory(claude_bin, real_env, stall_minutes=0.03, stall_action="interrupt")
    engine.start("hung", str(prompt_file), trigger="hung-1 MOCK:hold=hung")
    calls = todos.wait_upserts("hung", 2, seconds=60)
    assert "the daemon interrupts it (--stall-action interrupt)" in calls[0]["body"]
    outcome = calls[1]["data"]["outcome"]
    assert outcome["outcome"] == "interrupted"
    assert "stalled: no event from claude for" in calls[1]["data"]["signals"]["SIGINT"]
    mock_api.release("hung")
