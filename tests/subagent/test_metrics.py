"""GET /metrics of a real subagent daemon running turns of the fake claude (tests/kit/fake_claude.py): turns by
outcome, the running ones, their cost and tokens move with the turns this test runs, and the text parses with
Prometheus' own parser."""

from __future__ import annotations

import sys
from pathlib import Path

from daemon_harness import start_daemon, wait_until
from kit.fake_claude import COST_PER_TURN, REPLY_TOKENS
from kit.gate import Gate
from kit.robust_kit import call_tool_raw, tool_result
from kit.scrape import scrape

DAEMON = Path(sys.executable).parent / "hive-subagent-daemon"


def _call(url: str, tool: str, **arguments) -> dict:
    result = tool_result(call_tool_raw(url, tool, arguments, timeout=90))
    assert not result["isError"], result
    return result


def test_turns_cost_and_tokens_move_with_real_turns(tmp_path, fake_claude_bin, fake_env, prompt_file):
    work = tmp_path / "work"
    work.mkdir()
    d = start_daemon([str(DAEMON), "--claude-bin", fake_claude_bin, "--workdir", str(work),
                      "--state-dir", str(tmp_path / "state")], tmp_path, env=fake_env)
    try:
        first = scrape(d.url)
        assert first.value("hive_subagent_turns_running") == 0
        assert first.value("hive_subagent_turns_total", outcome="completed") == 0
        gate = Gate(tmp_path)
        _call(d.url, "start", name="held", prompt_file=str(prompt_file), trigger=f"FAKE:gate={gate.path}")
        failing = tool_result(call_tool_raw(d.url, "start", {"name": "failing", "prompt_file": str(prompt_file),
                                                             "trigger": "FAKE:exit=3"}, timeout=90))
        # On a loaded machine claude may fail before its start is answered: the start then answers its end, an
        # error, and is counted as one.
        refused = int(failing["isError"])
        assert not refused or failing["content"][0]["text"].startswith("state=ended name=failing outcome=error")
        wait_until(lambda: scrape(d.url).value("hive_subagent_turns_total", outcome="error") == 1, 30,
                   "the failing turn counted")
        held = scrape(d.url)
        assert held.value("hive_subagent_turns_running") == 1
        gate.open()
        _call(d.url, "status", name="held", wait_seconds=30)
        after = wait_until(lambda: (s := scrape(d.url)).value("hive_subagent_turns_running") == 0 and s, 30,
                           "the held turn's end")
        assert after.value("hive_subagent_turns_total", outcome="completed") == 1
        assert after.total("hive_subagent_turns_total") == 2
        assert abs(after.value("hive_subagent_cost_usd_total") - COST_PER_TURN) < 1e-9
        assert after.value("hive_subagent_tokens_total", kind="input") == REPLY_TOKENS[0]
        assert after.value("hive_subagent_tokens_total", kind="output") == REPLY_TOKENS[1]
        assert after.value("hive_subagent_tool_calls_total", tool="start", outcome="ok") == 2 - refused
        assert after.total("hive_subagent_tool_calls_total", tool="start", outcome="error") == refused
        assert after.value("hive_subagent_tool_call_duration_seconds_count", tool="status") >= 1
        assert after.value("hive_subagent_inline_waits_held") == 0
    finally:
        d.stop()
