"""The stall line a watch reports: said whenever the silence passed the threshold, whatever the rounding, and
told once per threshold of one silence (the fake claude stays silent at a gate)."""

from __future__ import annotations

import time
from pathlib import Path

from kit.gate import Gate

from common.waiting import wait_for
from hivesubagent.turns import views
from hivesubagent.turns.turn import Turn


def _silent_turn(threshold: float, silence: float) -> Turn:
    turn = Turn("job", "start", "sid", Path("/t.jsonl"), None, "go", 1, 0.0)
    turn.stall_after_s = threshold
    turn.stream.progress.last_event_mono = time.monotonic() - silence
    return turn


def test_a_threshold_off_the_tenth_of_a_second_grid_still_gets_its_stall_line():
    # --stall-minutes 0.012 is 0.72 s; 0.721 s of silence shows as idle_s 0.7, below it, once rounded.
    turn = _silent_turn(0.72, 0.721)
    progress = {**turn.stream.progress.view(), "idle_s": 0.7}  # as the view rounds it (however late it is taken)
    assert views.stall_text(turn, progress) == "no event from claude for 1 s; last: claude started 1 s ago"


def test_no_stall_line_before_the_threshold_or_without_one():
    assert views.stall_text(_silent_turn(60.0, 1.0), _silent_turn(60.0, 1.0).stream.progress.view()) is None
    quiet = _silent_turn(60.0, 120.0)
    quiet.stall_after_s = None
    assert views.stall_text(quiet, quiet.stream.progress.view()) is None


def test_a_silence_over_two_thresholds_is_told_once_at_each(engine_factory, fake_claude_bin, fake_env, prompt_file,
                                                           tmp_path):
    engine, todos = engine_factory(fake_claude_bin, fake_env, stall_minutes=0.01)  # a threshold of 0.6 s
    gate = Gate(tmp_path)
    engine.start("quiet", str(prompt_file), trigger=f"FAKE:gate={gate.path}")
    try:
        todos.wait_upserts("quiet", 2, seconds=10)  # two notices: the silence passed two thresholds
    finally:
        gate.open()
    with todos.cond:
        assert wait_for(todos.cond, lambda: "completed" in todos.upserts("quiet")[-1]["summary"], 20), todos.calls
    stalls = [u for u in todos.upserts("quiet") if "stalled" in u["summary"]]
    # The silence each notice saw (idle_s, in tenths of a second), in thresholds: one notice at each.
    idle = [u["data"]["progress"]["idle_s"] for u in stalls]
    assert len(stalls) >= 2 and [round(i * 10) // 6 for i in idle] == list(range(1, len(stalls) + 1)), idle
