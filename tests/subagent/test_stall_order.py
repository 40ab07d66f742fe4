"""A stall notice and the turn's end, racing: the notice is queued while the turn cannot end (under the turn
table's lock), so it never lands after the completion todo and hides it. The todo recorder here holds the
notice back until the turn has ended (or a second and a half has passed): before the fix the completion was
queued first, and the agent's board was left showing a stall for a turn that had finished."""

from __future__ import annotations

import time

import pytest
from kit.gate import Gate

from hivesubagent.turns import turn as T


@pytest.mark.slow
def test_a_stall_notice_never_replaces_the_completion_todo(engine_factory, fake_claude_bin, fake_env, prompt_file,
                                                            tmp_path):
    engine, todos = engine_factory(fake_claude_bin, fake_env, stall_minutes=0.01)  # 0.6 s of silence
    record, gate = todos.upsert, Gate(tmp_path)  # the turn ends once its stall is being told, not before

    def slow_stall_notice(key, summary, body, data=None):
        if "stalled" in summary:
            gate.open()
            turn = engine.table._running.get(key)  # (read bare: the notice may be queued under the lock)
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline and not (turn is None or turn.state == T.ENDED):
                time.sleep(0.01)  # (the race is the point: no condition to wait on from in here)
        return record(key, summary, body, data)

    todos.upsert = slow_stall_notice
    engine.start("quiet", str(prompt_file), trigger=f"FAKE:gate={gate.path}")
    upserts = todos.wait_upserts("quiet", 2, seconds=20)
    assert "stalled" in upserts[0]["summary"] and "outcome" in upserts[1]["data"], upserts
    assert todos.for_key("quiet")[-1][0] == "upsert" and "outcome" in todos.for_key("quiet")[-1][4]
