"""A turn past its time whose claude ignores SIGINT (the daemon interrupts at the deadline and
escalates after the grace): SIGKILL ends it, and the outcome is still `timed_out`, saying both signals. The
fake claude stands in for a claude that will not stop: the real one always honours SIGINT."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_a_timed_out_turn_that_ignores_sigint_is_killed_and_stays_timed_out(engine_factory, fake_claude_bin, fake_env,
                                                                            prompt_file):
    engine, todos = engine_factory(fake_claude_bin, fake_env, turn_timeout=1.0, kill_grace=0.5)
    engine.start("deaf", str(prompt_file), trigger="FAKE:ignore-int FAKE:sleep=60")
    todo = todos.wait_upserts("deaf", seconds=20)[0]
    outcome = todo["data"]["outcome"]
    assert outcome["outcome"] == "timed_out" and outcome["returncode"] == -9, outcome
    assert todo["data"]["signals"] == {"SIGINT": "timeout_minutes=0.017", "SIGKILL": "still running 0.5s after SIGINT"}
    assert "stopped by SIGINT (timeout_minutes=0.017), SIGKILL (still running 0.5s after SIGINT)" in outcome["detail"]
    assert todo["summary"] == "subagent deaf: turn 1 timed_out, cost unknown", todo["summary"]
    assert engine.status("deaf")["last_turn"]["outcome"] == "timed_out"
