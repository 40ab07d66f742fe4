"""The agent's view of a subagent, against the REAL claude CLI (2.1.328) and the Messages API mock: the whole
result read through pages, progress seen mid-turn, a budget stop, the archive put back after a failed start,
and the claude-subagents skill loaded by claude as docs/operations.md installs it."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from kit.mock_messages_api import long_reply
from kit.subagent_testkit import wait_for_turns

from common.protocol.argument_errors import ToolArgumentsError
from hivesubagent.answers.pages import PAGE_BYTES
from hivesubagent.tools import build_registry
from hivesubagent.transcripts import index_file

pytestmark = pytest.mark.interop

SKILL_DIR = Path(__file__).resolve().parents[2] / "hivesubagent" / "skills" / "claude-subagents"
ANSWER_LIMIT = 8192  # bytes: every answer the model reads stays under it


def test_a_50000_character_result_is_read_whole_through_pages(engine_factory, claude_bin, real_env,
                                                              prompt_file, tmp_path):
    engine, todos = engine_factory(claude_bin, real_env)
    tools = build_registry(engine)
    engine.start("long", str(prompt_file), trigger="long-1 MOCK:long=50000")
    todo = todos.wait_upserts("long")[0]
    expected = long_reply(50000)
    outcome = todo["data"]["outcome"]
    assert outcome["outcome"] == "completed" and outcome["result_chars"] == 50000
    assert len(todo["body"].encode()) < ANSWER_LIMIT
    assert f"result (1500 of 50000 characters):\n{expected[:1500]}\n" in todo["body"]
    assert 'status(name="long", result_offset=1500) reads on' in todo["body"]
    first = tools.call("status", {"name": "long"})
    assert 'status(name="long", result_offset=1500) reads on' in first.text and len(first.text.encode()) < ANSWER_LIMIT

    def read_all(registry) -> tuple[str, int]:
        pieces, offset, calls = [], 0, 0
        while offset is not None:
            answer = registry.call("status", {"name": "long", "result_offset": offset})
            assert not answer.is_error and len(answer.text.encode()) < ANSWER_LIMIT, answer.text[:300]
            got = answer.data["result_page"]
            assert got["offset"] == offset and got["total_chars"] == 50000 and len(got["text"].encode()) <= PAGE_BYTES
            assert got["text"] in answer.text
            pieces.append(got["text"])
            offset, calls = got["next_offset"], calls + 1
        assert answer.text.endswith("(end of the result)")
        return "".join(pieces), calls

    whole, calls = read_all(tools)
    assert whole == expected and calls == 9  # 50,000 ASCII characters in 6 KiB pages
    past = tools.call("status", {"name": "long", "result_offset": 50001})
    assert past.is_error and "result_offset: 50001 is past the end (the result has 50000 characters)" in past.text
    # A restarted daemon (a new engine, nothing in memory) reads the same text from claude's transcript.
    engine.shutdown()
    # The index kept for the restart: no text of claude's.
    saved = (tmp_path / "state" / index_file.FILE_NAME).read_text()
    assert '"name":"long"' in saved and "line 000001" not in saved and "long-1" not in saved
    restarted, _ = engine_factory(claude_bin, real_env)
    assert read_all(build_registry(restarted))[0] == expected


def test_progress_shows_mid_turn_while_a_tool_call_is_held(engine_factory, claude_bin, real_env, prompt_file, mock_api):
    engine, todos = engine_factory(claude_bin, real_env)
    tools = build_registry(engine)
    engine.start("prog", str(prompt_file),
                 trigger='prog-1 MOCK:hold=prog\nMOCK:tool=Bash {"command": "echo progress-marker"}')

    def progress():
        return (engine.running_view("prog") or {}).get("progress")

    # The mock holds the reply after the tool result until released: the turn is mid-way for as long as we look.
    seen = wait_for_turns(engine, lambda: (progress() or {}).get("tool_calls") == 1, 60.0)
    assert seen, f"no tool call seen in the stream: {progress()}"
    status = tools.call("status", {"name": "prog"})
    p = status.data["progress"]
    assert status.data["running"] is True and p["steps"] >= 1 and p["tools"] == {"Bash": 1}
    assert p["latest_tool"] == "Bash" and p["latest_tool_input"] == "command=echo progress-marker"
    assert p["input_tokens"] > 0 and p["idle_s"] >= 0
    lines = status.text.splitlines()
    assert lines[1].startswith("progress: ") and "Bash x1" in lines[1]
    assert lines[2] == "latest tool call: Bash: command=echo progress-marker"
    assert "steps=" in tools.call("status", {}).text
    mock_api.release("prog")
    outcome = todos.wait_upserts("prog")[0]["data"]["outcome"]
    assert outcome["outcome"] == "completed" and outcome["result_text"] == "tool said: progress-marker"


def test_a_budget_stop_is_its_own_outcome(engine_factory, claude_bin, real_env, prompt_file, mock_api):
    # The daemon's default budget (the knob) applies when a start passes none.
    engine, todos = engine_factory(claude_bin, real_env, max_budget_usd=0.01)
    tools = build_registry(engine)
    started = tools.call("start", {"name": "spend", "prompt_file": str(prompt_file),
                                   "trigger": "spend-1 MOCK:cost=100000\nMOCK:reply=spent it all"})
    assert "max_budget_usd=0.01" in started.text.splitlines()[0]
    todo = todos.wait_upserts("spend")[0]
    outcome = todo["data"]["outcome"]
    assert outcome["outcome"] == "budget_exceeded" and outcome["terminal_reason"] == "budget_exhausted"
    assert outcome["returncode"] == 1 and outcome["max_budget_usd"] == 0.01
    assert outcome["cost_usd"] > 0.01 and outcome["result_text"] == "spent it all"  # the reply it cut short
    assert "Reached maximum budget ($0.01)" in outcome["detail"]
    assert todo["summary"].startswith("subagent spend: turn 1 budget_exceeded, $")
    assert "max_budget_usd=0.01" in todo["body"].splitlines()[0] and "max_budget_usd=..." in todo["body"]
    status = tools.call("status", {"name": "spend"})
    assert status.data["last_turn"]["outcome"] == "budget_exceeded" and "last_outcome=budget_exceeded" in status.text
    assert status.data["last_turn"]["cost_usd"] == pytest.approx(outcome["cost_usd"])
    # A turn's own budget overrides the default; claude counts only this run's spending, not the session's.
    tools.call("continue", {"name": "spend", "prompt": "spend-2 MOCK:reply=within budget", "max_budget_usd": 0.5})
    second = todos.wait_upserts("spend", 2)[1]["data"]["outcome"]
    assert second["outcome"] == "completed" and second["max_budget_usd"] == 0.5 and second["total_cost_usd"] > 0.5
    with pytest.raises(ToolArgumentsError, match="max_budget_usd: must be > 0"):
        tools.call("continue", {"name": "spend", "prompt": "x", "max_budget_usd": 0})


def test_a_failed_start_puts_the_archived_session_back(engine_factory, claude_bin, real_env, prompt_file, tmp_path,
                                                       caplog):
    engine, todos = engine_factory(claude_bin, real_env)
    kept = engine.start("keep", str(prompt_file), trigger="keep-1 MOCK:reply=kept")
    todos.wait_upserts("keep")
    # The same claude given a flag it does not know: it exits 1 before writing any transcript.
    broken = tmp_path / "claude-broken"
    broken.write_text(f'#!/bin/sh\nexec "{claude_bin}" "$@" --no-such-flag\n')
    broken.chmod(0o755)
    other, other_todos = engine_factory(str(broken), real_env)
    archived = kept["transcript"] + ".archived"
    with caplog.at_level(logging.INFO, logger="hivesubagent"):
        view = other.start("keep", str(prompt_file), trigger="keep-2")
        failed = other_todos.wait_upserts("keep")[0]
    # The broken claude may exit before start() answers: the runner has then put the archive back already,
    # and the answer lists what is archived at that moment. Either way the log shows both steps.
    assert view["archived"] in ([archived], [])
    assert f"session keep: archived {archived}" in caplog.text
    assert f"session keep: the new session did not start; put back {kept['transcript']}" in caplog.text
    outcome = failed["data"]["outcome"]
    assert outcome["outcome"] == "error" and outcome["exited_without_result"] is True
    assert "no-such-flag" in outcome["detail"] and "no-such-flag" not in outcome["result_text"]
    assert failed["body"].count("no-such-flag") == 1  # claude's stderr once, not twice
    assert Path(kept["transcript"]).is_file() and not Path(kept["transcript"] + ".archived").exists()
    status = engine.status("keep")
    assert status["session_id"] == kept["session_id"] and status["last_turn"]["result_text"] == "kept"
    engine.continue_("keep", "keep-3 MOCK:reply=still here")
    assert todos.wait_upserts("keep", 2)[1]["data"]["outcome"]["result_text"] == "still here"


def test_the_skill_reaches_claude_when_installed_as_documented(engine_factory, claude_bin, real_env,
                                                               prompt_file, mock_api):
    """docs/operations.md: copy hivesubagent/skills/claude-subagents to ~/.claude/skills/ of the agent's user."""
    skills = Path(real_env["HOME"]) / ".claude" / "skills"
    skills.mkdir(parents=True)
    shutil.copytree(SKILL_DIR, skills / "claude-subagents")
    front = (SKILL_DIR / "SKILL.md").read_text().split("---")[1]
    description = next(line for line in front.splitlines()
                       if line.startswith("description: ")).removeprefix("description: ")
    assert "name: claude-subagents" in front and len(description) <= 1024
    engine, todos = engine_factory(claude_bin, real_env)
    engine.start("skilled", str(prompt_file), trigger="skill-1 MOCK:reply=ok")
    assert todos.wait_upserts("skilled")[0]["data"]["outcome"]["outcome"] == "completed"
    request = next(r.body for r in mock_api.message_requests() if "skill-1" in json.dumps(r.body.get("messages")))
    assert f"- claude-subagents: {description}" in json.dumps(request, ensure_ascii=False).replace("\\n", "\n")
