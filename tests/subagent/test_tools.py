"""The tool declarations and the text the model reads (no claude needed: views are built by hand)."""

from __future__ import annotations

import json

import pytest

from common.config import SubagentSettings
from common.tools import ToolArgumentsError, UnknownTool
from hivesubagent.engine import SubagentEngine
from hivesubagent.result_pages import EXCERPT_BYTES, PAGE_BYTES, OffsetError, excerpt, page
from hivesubagent.texts import kv, render_list, render_session, turn_result
from hivesubagent.tools import build_registry


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
    # an unknown argument names the known one it was most likely meant as
    with pytest.raises(ToolArgumentsError, match=r"'prompt' \(the first turn's prompt is 'trigger'; the instructions file is 'prompt_file'\)"):
        registry.call("start", {"name": "x", "prompt_file": "/p", "prompt": "do it"})
    with pytest.raises(ToolArgumentsError, match=r"'wait' \(did you mean 'wait_seconds'\?\)"):
        registry.call("status", {"name": "x", "wait": 3})


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
               "confirmed": True, "signals": {}, "archived": ["/old.jsonl.archived"],
               "progress": {"steps": 1, "tool_calls": 0, "tools": {}, "latest_tool": None, "latest_tool_input": None,
                            "input_tokens": None, "output_tokens": None, "idle_s": 0.5}}
    text = turn_result(running, "started").text.splitlines()
    assert text[0] == "state=running name=job session_id=sid turn=1 pid=42"  # model unknown: left out, not guessed
    assert turn_result({**running, "model": "claude-haiku-4-5"}, "started").text.splitlines()[0].endswith(" model=claude-haiku-4-5")
    assert text[1] == "archived the earlier session(s) of this name: /old.jsonl.archived" and text[-1] == "transcript: /t.jsonl"
    ended = {**running, "state": "ended", "running": False, "outcome": {
        "outcome": "error", "detail": "API error 500", "result_text": "API Error: 500", "cost_usd": 0.0, "total_cost_usd": 0.5,
        "duration_s": 1.0, "exited_without_result": False, "returncode": 1, "result_chars": 14, "result_next_offset": None}}
    result = turn_result(ended, "started")
    assert result.is_error and result.text.startswith("state=ended name=job outcome=error session_id=sid turn=1 cost_usd=0 total_cost_usd=0.5")
    finished = {"name": "job", "state": "finished", "running": False, "session_id": "sid", "transcript": "/t.jsonl", "model": "m",
                "turns": 3, "total_cost_usd": 1.5, "updated_at": "x",
                "last_turn": {"outcome": "interrupted", "exited_without_result": True, "result_text": "", "cost_usd": None, "duration_s": None,
                              "result_chars": 0, "result_next_offset": None}}
    assert render_session(finished).splitlines()[0] == (
        "name=job state=finished running=false session_id=sid turns=3 model=m last_outcome=interrupted last_cost_usd=none "
        "total_cost_usd=1.5 last_duration_s=none")
    assert "ended without a result" in render_session(finished)
    listing = render_list({"sessions": [running, finished], "running": 1, "more": 0}).splitlines()
    assert listing[0] == "sessions=2 running=1 more=0"
    assert listing[1].startswith("name=job state=running") and listing[2].startswith("name=job state=finished")


def test_descriptions_teach_and_stay_short(registry, tmp_path, capsys):
    """Each description says where the subagent runs, what it can use, the cap, and how to read a whole result;
    their sizes are printed (pytest -s) and bounded, since every tools/list carries them into the context."""
    listing = {t["name"]: t for t in registry.listing()}
    sizes = {name: len(t["description"]) for name, t in listing.items()}
    schema_sizes = {name: len(json.dumps(t)) for name, t in listing.items()}
    with capsys.disabled():
        print(f"\ndescription characters: {sizes}, total {sum(sizes.values())}; whole tool entries (JSON): {schema_sizes}")
    for name in ("start", "continue"):
        text = listing[name]["description"]
        assert f"working directory {tmp_path}" in text and "not yours" in text
        assert "built-in tools only" in text and "no MCP servers" in text
        assert "At most 4 run at once" in text and "result_offset" in text
    assert "result_offset" in listing["status"]["description"] and "at most 4 run at once" in listing["status"]["description"]
    assert "{" not in "".join(t["description"] for t in listing.values())  # every placeholder filled
    assert all(size <= 900 for size in sizes.values()) and sum(sizes.values()) <= 3000, sizes


def test_result_pages_are_bounded_in_bytes_and_addressed_in_characters():
    text = "".join(f"{i:05d}é€𝄞\n" for i in range(3000))  # 1-, 2-, 3- and 4-byte characters
    pages, offset = [], 0
    while offset is not None:
        p = page(text, offset)
        assert len(p.text.encode()) <= PAGE_BYTES and p.text
        pages.append(p.text)
        offset = p.next_offset
    assert "".join(pages) == text and len(pages) > 3
    assert page(text, len(text)).text == "" and page(text, len(text)).next_offset is None
    with pytest.raises(OffsetError, match=f"result_offset: {len(text) + 1} is past the end \\(the result has {len(text)} characters\\)"):
        page(text, len(text) + 1)
    start = excerpt(text, 1500)
    assert len(start.text) <= 1500 and len(start.text.encode()) <= EXCERPT_BYTES and start.next_offset == len(start.text)
    assert excerpt("short", 1500).next_offset is None


def test_a_result_page_answer_says_where_it_is_and_how_to_go_on():
    finished = {"name": "job", "state": "finished", "running": False, "session_id": "sid", "transcript": "/t.jsonl", "model": "m",
                "turns": 1, "total_cost_usd": 0.5, "updated_at": "x", "last_turn": {"outcome": "completed", "result_text": "abc",
                "result_chars": 9000, "result_next_offset": 3, "cost_usd": 0.5, "duration_s": 1.0},
                "result_page": {"offset": 3, "chars": 6000, "total_chars": 9000, "next_offset": 6003, "text": "x" * 6000}}
    lines = render_session(finished).splitlines()
    assert lines[3] == "result_offset=3 chars=6000 total_chars=9000 next_offset=6003" and lines[4] == "x" * 6000
    assert lines[5].startswith('2997 more characters: status(name="job", result_offset=6003)')
    assert len(render_session(finished).encode()) < 8192
    last = render_session({**finished, "result_page": {**finished["result_page"], "next_offset": None, "chars": 2997, "text": "y"}})
    assert last.splitlines()[-1] == "(end of the result)"
    plain = render_session({k: v for k, v in finished.items() if k != "result_page"}).splitlines()
    assert plain[-3:] == ["last result (3 of 9000 characters):", "abc", '8997 more characters: status(name="job", result_offset=3) reads on, a page of up to 6 KiB at a time']


def test_progress_of_a_running_turn_reads_in_one_line():
    from hivesubagent.progress import Progress, short_input

    p = Progress()
    p.assistant({"id": "m1", "content": [{"type": "text", "text": "looking"}], "usage": {"input_tokens": 10, "output_tokens": 1}})
    p.assistant({"id": "m1", "content": [{"type": "tool_use", "name": "Bash", "input": {"command": "grep -rn x .\n| head"}}],
                 "usage": {"input_tokens": 10, "output_tokens": 5}})
    p.assistant({"id": "m2", "content": [{"type": "tool_use", "name": "Read", "input": {"file_path": "/a/b.py"}}]})
    view = p.view()
    assert (view["steps"], view["tool_calls"], view["tools"]) == (2, 2, {"Bash": 1, "Read": 1})
    assert (view["latest_tool"], view["latest_tool_input"]) == ("Read", "file_path=/a/b.py")
    assert (view["input_tokens"], view["output_tokens"]) == (10, 5)
    assert short_input({"command": "a\nb  c"}) == "command=a b c" and len(short_input({"x": "y" * 500})) == 160
    running = {"name": "job", "state": "running", "running": True, "session_id": "sid", "transcript": "/t.jsonl", "turn": 2,
               "pid": 42, "model": None, "started_at": "t", "elapsed_s": 3.0, "signals": {}, "turns_done": 1, "total_cost_usd": 0.1,
               "max_budget_usd": 0.5, "progress": view}
    lines = render_session(running).splitlines()
    assert lines[0] == "name=job state=running running=true session_id=sid turn=2 pid=42 elapsed_s=3.0 max_budget_usd=0.5"
    assert lines[1].startswith("progress: 2 step(s), 2 tool call(s) (Bash x1, Read x1); last event ")
    assert lines[2] == "latest tool call: Read: file_path=/a/b.py"


def test_a_long_session_list_stays_under_8_kib():
    finished = {"name": "job", "state": "finished", "running": False, "session_id": "0" * 36, "transcript": "/t.jsonl", "model": "m",
                "turns": 3, "total_cost_usd": 1.5, "updated_at": "2026-11-30T10:00:00+00:00", "last_turn": {"outcome": "completed"}}
    sessions = [{**finished, "name": f"session-{i:03d}"} for i in range(100)]
    text = render_list({"sessions": sessions, "running": 0, "more": 0})
    lines = text.splitlines()
    assert len(text.encode()) < 8192 and lines[0] == "sessions=100 running=0 more=0"
    shown = len(lines) - 2
    assert 10 < shown < 100 and lines[-1] == f"... {100 - shown} more not shown: status(name=...) shows one session"
    assert lines[1].startswith("name=session-000 ")
