"""The tool declarations and the text the model reads (no claude needed: views are built by hand)."""

from __future__ import annotations

import pytest

from common.config import SubagentSettings
from common.tools import ToolArgumentsError, UnknownTool
from hivesubagent.engine import SubagentEngine
from hivesubagent.tools import _turn_result, build_registry, kv, render_list, render_session


@pytest.fixture
def registry(tmp_path):
    settings = SubagentSettings(claude_bin="claude", workdir=tmp_path, state_dir=tmp_path / "state")
    return build_registry(SubagentEngine(settings, todos=None, base_env={"HOME": str(tmp_path)}))


def test_four_tools_with_descriptions_and_closed_schemas(registry):
    listing = registry.listing()
    assert [t["name"] for t in listing] == ["start", "continue", "interrupt", "status"]
    for tool in listing:
        assert len(tool["description"]) > 100 and tool["inputSchema"]["additionalProperties"] is False
        assert "outputSchema" not in tool
    assert listing[0]["inputSchema"]["required"] == ["name", "prompt_file"]
    assert listing[3]["annotations"] == {"readOnlyHint": True}
    with pytest.raises(UnknownTool):
        registry.call("kill", {})
    with pytest.raises(ToolArgumentsError, match="arguments: unknown argument"):
        registry.call("status", {"nam": "x"})


def test_status_of_nothing(registry):
    result = registry.call("status", {})
    assert not result.is_error and result.text.splitlines()[0] == "sessions=0 running=0 more=0"
    assert result.data == {"sessions": [], "running": 0, "more": 0}


def test_kv_quotes_what_would_break_the_line():
    assert kv(a=1, b=None, c=True, d="two words", cost_usd=0.000184, elapsed_s=1.25) == (
        'a=1 b=none c=true d="two words" cost_usd=0.000184 elapsed_s=1.2'
    )
    assert kv(x='say "hi"', y="") == 'x="say \\"hi\\"" y=""'


def test_texts_the_model_reads():
    running = {"name": "job", "state": "running", "running": True, "session_id": "sid", "transcript": "/t.jsonl", "kind": "start",
               "turn": 1, "pid": 42, "model": None, "started_at": "2026-11-30T10:00:00+00:00", "elapsed_s": 3.0,
               "confirmed": True, "signals": {}, "archived": ["/old.jsonl.archived"]}
    text = _turn_result(running, "started").text.splitlines()
    assert text[0] == "state=running name=job session_id=sid turn=1 pid=42 model=default"
    assert text[1] == "archived the earlier session(s) of this name: /old.jsonl.archived" and text[-1] == "transcript: /t.jsonl"
    ended = {**running, "state": "ended", "running": False, "outcome": {
        "outcome": "error", "detail": "API error 500", "result_text": "API Error: 500", "cost_usd": 0.0, "total_cost_usd": 0.5,
        "duration_s": 1.0, "exited_without_result": False, "returncode": 1, "result_chars": 14}}
    result = _turn_result(ended, "started")
    assert result.is_error and result.text.startswith("state=ended name=job outcome=error session_id=sid turn=1 cost_usd=0 total_cost_usd=0.5")
    finished = {"name": "job", "state": "finished", "running": False, "session_id": "sid", "transcript": "/t.jsonl", "model": "m",
                "turns": 3, "total_cost_usd": 1.5, "updated_at": "x",
                "last_turn": {"outcome": "interrupted", "exited_without_result": True, "result_text": "", "cost_usd": None, "duration_s": None}}
    assert render_session(finished).splitlines()[0] == (
        "name=job state=finished running=false session_id=sid turns=3 model=m last_outcome=interrupted last_cost_usd=none "
        "total_cost_usd=1.5 last_duration_s=none")
    assert "ended without a result" in render_session(finished)
    listing = render_list({"sessions": [running, finished], "running": 1, "more": 0}).splitlines()
    assert listing[0] == "sessions=2 running=1 more=0"
    assert listing[1].startswith("name=job state=running") and listing[2].startswith("name=job state=finished")
