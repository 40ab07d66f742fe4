"""The stall line a watch reports: said whenever the silence passed the threshold, whatever the rounding."""

from __future__ import annotations

import time
from pathlib import Path

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
