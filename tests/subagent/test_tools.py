"""The tool declarations and the text the model reads (no claude needed: views are built by hand)."""

from __future__ import annotations

import json

import pytest

from common.config import SubagentSettings
from common.notices import Notices, promises_a_notice
from common.protocol.argument_errors import ToolArgumentsError
from common.protocol.tools import UnknownTool
from hivesubagent.answers.pages import EXCERPT_BYTES, PAGE_BYTES, OffsetError, excerpt, page
from hivesubagent.answers.texts import kv, render_list, render_session, turn_result
from hivesubagent.engine import SubagentEngine
from hivesubagent.tools import build_registry

SOCKET, NO_SOCKET = Notices(True), Notices(False)


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
    with pytest.raises(ToolArgumentsError, match=r"'prompt' \(the first turn's prompt is 'trigger'; "
                                                 r"the instructions file is 'prompt_file'\)"):
        registry.call("start", {"name": "x", "prompt_file": "/p", "prompt": "do it"})
    with pytest.raises(ToolArgumentsError, match=r"'wait' \(did you mean 'wait_seconds'\?\)"):
        registry.call("status", {"name": "x", "wait": 3})


def test_status_of_nothing(registry):
    result = registry.call("status", {})
    assert not result.is_error and result.text.splitlines()[0] == "sessions=0 running=0 more=0"
    assert result.data == {"sessions": [], "running": 0, "more": 0}


def test_kv_quotes_what_would_break_the_line():
    assert kv(a=1, b=None, c=True, d="two words", cost_usd=0.000184, elapsed_s=1.25) == (
        'a=1 b=unknown c=true d="two words" cost_usd=0.000184 elapsed_s=1.2'
    )
    assert kv(x='say "hi"', y="") == 'x="say \\"hi\\"" y=""'


def test_texts_the_model_reads():
    running = {"name": "job", "state": "running", "running": True, "session_id": "sid", "transcript": "/t.jsonl",
               "kind": "start", "turn": 1, "pid": 42, "model": None, "started_at": "2026-11-30T10:00:00+00:00",
               "elapsed_s": 3.0,
               "confirmed": True, "signals": {}, "archived": ["/old.jsonl.archived"],
               "progress": {"steps": 1, "tool_calls": 0, "tools": {}, "latest_tool": None, "latest_tool_input": None,
                            "input_tokens": None, "output_tokens": None, "idle_s": 0.5}}
    text = turn_result(running, "started", SOCKET).text.splitlines()
    # model unknown: left out, not guessed; the caps in force named, "none" for no cap
    assert text[0] == ("state=running name=job session_id=sid turn=1 pid=42 max_budget_usd=none max_turns=none "
                       "timeout_minutes=none")
    assert turn_result({**running, "model": "claude-haiku-4-5"}, "started", SOCKET).text.splitlines()[0].endswith(
        " model=claude-haiku-4-5 max_budget_usd=none max_turns=none timeout_minutes=none")
    assert text[1] == "archived the earlier session(s) of this name: /old.jsonl.archived"
    assert text[-1] == "transcript: /t.jsonl"
    ended = {**running, "state": "ended", "running": False, "outcome": {
        "outcome": "error", "detail": "API error 500", "result_text": "API Error: 500", "cost_usd": 0.0,
        "total_cost_usd": 0.5, "duration_s": 1.0, "exited_without_result": False, "returncode": 1, "result_chars": 14,
        "result_next_offset": None}}
    result = turn_result(ended, "started", SOCKET)
    assert result.is_error and result.text.startswith("state=ended name=job outcome=error session_id=sid turn=1 "
                                                      "cost_usd=0 total_cost_usd=0.5")
    finished = {"name": "job", "state": "finished", "running": False, "session_id": "sid", "transcript": "/t.jsonl",
                "model": "m", "turns": 3, "total_cost_usd": 1.5, "updated_at": "x",
                "last_turn": {"outcome": "interrupted", "exited_without_result": True, "result_text": "",
                              "cost_usd": None, "duration_s": None, "result_chars": 0, "result_next_offset": None}}
    assert render_session(finished).splitlines()[0] == (
        "name=job state=finished running=false session_id=sid turns=3 model=m last_outcome=interrupted "
        "last_cost_usd=unknown total_cost_usd=1.5 last_duration_s=unknown")
    assert "ended without a result" in render_session(finished)
    listing = render_list({"sessions": [running, finished], "running": 1, "more": 0}).splitlines()
    assert listing[0] == "sessions=2 running=1 more=0"
    assert listing[1].startswith("name=job state=running") and listing[2].startswith("name=job state=finished")


def test_descriptions_teach_and_stay_short(registry, tmp_path, capsys):
    """Each description says where the subagent runs, what it can use, the cap, and how to read a whole result;
    their sizes are printed (pytest -s) and bounded, since every tools/list carries them into the context."""
    listing = {t["name"]: t for t in registry.listing()}
    # measured with the working directory as a fixed word: its path is the test's, and its length is not ours
    sizes = {name: len(t["description"].replace(str(tmp_path), "/srv/project")) for name, t in listing.items()}
    schema_sizes = {name: len(json.dumps(t)) for name, t in listing.items()}
    with capsys.disabled():
        print(f"\ndescription characters: {sizes}, total {sum(sizes.values())}; whole tool entries "
              f"(JSON): {schema_sizes}")
    for name in ("start", "continue"):
        text = listing[name]["description"]
        assert f"working directory {tmp_path}" in text and "not yours" in text
        assert "built-in tools only" in text and "no MCP servers" in text
        assert "At most 4 run at once" in text and "result_offset" in text
    assert "result_offset" in listing["status"]["description"]
    assert "at most 4 run at once" in listing["status"]["description"]
    assert "{" not in "".join(t["description"] for t in listing.values())  # every placeholder filled
    assert all(size <= 900 for size in sizes.values()) and sum(sizes.values()) <= 3000, sizes
    # the arguments' own descriptions too: each a line or two, none with a placeholder left
    arguments = {f"{name}.{arg}": spec.get("description", "") for name, t in listing.items()
                 for arg, spec in t["inputSchema"]["properties"].items()}
    assert all(0 < len(text) <= 260 for text in arguments.values()), {k: len(v) for k, v in arguments.items()}
    assert not any("{default" in text or "{max_running}" in text for text in arguments.values())
    for name in ("start.max_turns", "start.timeout_minutes", "continue.max_budget_usd", "status.names",
                 "status.wait_seconds", "status.all", "status.steps", "status.steps_offset"):
        assert name in arguments, name
    # 7.4 K before start took cwd, worktree and the tool limits and effort (continue those four, said once)
    assert sum(schema_sizes.values()) <= 9600, schema_sizes


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
    with pytest.raises(OffsetError, match=f"result_offset: {len(text) + 1} is past the end \\(the result has "
                                          f"{len(text)} characters\\)"):
        page(text, len(text) + 1)
    start = excerpt(text, 1500)
    assert len(start.text) <= 1500 and len(start.text.encode()) <= EXCERPT_BYTES
    assert start.next_offset == len(start.text)
    assert excerpt("short", 1500).next_offset is None


def test_a_result_page_answer_says_where_it_is_and_how_to_go_on():
    finished = {"name": "job", "state": "finished", "running": False, "session_id": "sid", "transcript": "/t.jsonl",
                "model": "m", "turns": 1, "total_cost_usd": 0.5, "updated_at": "x",
                "last_turn": {"outcome": "completed", "result_text": "abc", "result_chars": 9000,
                              "result_next_offset": 3, "cost_usd": 0.5, "duration_s": 1.0},
                "result_page": {"offset": 3, "chars": 6000, "total_chars": 9000, "next_offset": 6003,
                                "text": "x" * 6000}}
    lines = render_session(finished).splitlines()
    assert lines[3] == "result_offset=3 chars=6000 total_chars=9000 next_offset=6003" and lines[4] == "x" * 6000
    assert lines[5].startswith('2997 more characters: status(name="job", result_offset=6003)')
    assert len(render_session(finished).encode()) < 8192
    last = render_session({**finished,
                           "result_page": {**finished["result_page"], "next_offset": None, "chars": 2997, "text": "y"}})
    assert last.splitlines()[-1] == "(end of the result)"
    plain = render_session({k: v for k, v in finished.items() if k != "result_page"}).splitlines()
    assert plain[-3:] == ["last result (3 of 9000 characters):", "abc",
                          '8997 more characters: status(name="job", result_offset=3) reads on, a page of up to 6 KiB '
                          'at a time']


def test_progress_of_a_running_turn_reads_in_one_line():
    from hivesubagent.turns.progress import Progress, short_input

    p = Progress()
    p.assistant({"id": "m1", "content": [{"type": "text", "text": "looking"}],
                 "usage": {"input_tokens": 10, "output_tokens": 1}})
    p.assistant({"id": "m1",
                 "content": [{"type": "tool_use", "name": "Bash", "input": {"command": "grep -rn x .\n| head"}}],
                 "usage": {"input_tokens": 10, "output_tokens": 5}})
    p.assistant({"id": "m2", "content": [{"type": "tool_use", "name": "Read", "input": {"file_path": "/a/b.py"}}]})
    view = p.view()
    assert (view["steps"], view["tool_calls"], view["tools"]) == (2, 2, {"Bash": 1, "Read": 1})
    assert (view["latest_tool"], view["latest_tool_input"]) == ("Read", "file_path=/a/b.py")
    assert (view["input_tokens"], view["output_tokens"]) == (10, 5)
    assert short_input({"command": "a\nb  c"}) == "command=a b c" and len(short_input({"x": "y" * 500})) == 160
    running = {"name": "job", "state": "running", "running": True, "session_id": "sid", "transcript": "/t.jsonl",
               "turn": 2, "pid": 42, "model": None, "started_at": "t", "elapsed_s": 3.0, "signals": {}, "turns_done": 1,
               "total_cost_usd": 0.1, "max_budget_usd": 0.5, "progress": view}
    lines = render_session(running).splitlines()
    assert lines[0] == ("name=job state=running running=true session_id=sid turn=2 pid=42 elapsed_s=3.0 "
                        "max_budget_usd=0.5")
    assert lines[1].startswith("progress: 2 step(s), 2 tool call(s) (Bash x1, Read x1); last event ")
    assert lines[2] == "latest tool call: Read: file_path=/a/b.py"


def test_a_long_session_list_stays_under_8_kib():
    finished = {"name": "job", "state": "finished", "running": False, "session_id": "0" * 36,
                "transcript": "/t.jsonl", "model": "m", "turns": 3, "total_cost_usd": 1.5,
                "updated_at": "2026-11-30T10:00:00+00:00", "last_turn": {"outcome": "completed"}}
    sessions = [{**finished, "name": f"session-{i:03d}"} for i in range(100)]
    text = render_list({"sessions": sessions, "running": 0, "more": 0})
    lines = text.splitlines()
    assert len(text.encode()) < 8192 and lines[0] == "sessions=100 running=0 more=0"
    shown = len(lines) - 2
    assert 10 < shown < 100 and lines[-1] == f"... {100 - shown} more not shown: status(name=...) shows one session"
    assert lines[1].startswith("name=session-000 ")


def _engine(tmp_path, **settings):
    tmp_path.mkdir(exist_ok=True)
    return SubagentEngine(SubagentSettings(claude_bin="claude", workdir=tmp_path,
                                           state_dir=tmp_path / "state", **settings),
                          todos=None, base_env={"HOME": str(tmp_path)})


def test_no_todo_is_promised_without_a_harness_socket(tmp_path):
    """Descriptions, instructions, answers and refusals: each says how to wait instead (common/notices.py)."""
    quiet = build_registry(_engine(tmp_path))
    said = [t["description"] for t in quiet.listing()] + [quiet.instructions or ""]
    assert not any(promises_a_notice(text) for text in said), said
    assert "status(name, wait_seconds=30) waits for the end" in quiet.listing()[0]["description"]
    running = {"name": "job", "state": "running", "session_id": "sid", "transcript": "/t.jsonl", "turn": 1, "pid": 42,
               "signals": {"SIGINT": "interrupt"}}
    for verb in ("started", "interrupted"):
        assert not promises_a_notice(turn_result(running, verb, NO_SOCKET).text)
        assert 'status(name="job", wait_seconds=30) waits for' in turn_result(running, verb, NO_SOCKET).text
    assert "you get a todo" in turn_result(running, "started", SOCKET).text
    told = build_registry(_engine(tmp_path / "s", agent_socket=tmp_path / "agent.sock"))
    assert "you get one todo with the outcome" in told.listing()[0]["description"]
    assert "get_loose_ends" not in json.dumps(told.listing())  # a harness tool the model may not have


def test_refusals_say_what_to_do(tmp_path):
    from hivesubagent.errors import SubagentError
    from hivesubagent.turns.table import TurnTable
    from hivesubagent.turns.turn import Turn

    table = TurnTable(2, NO_SOCKET)
    for name in ("a", "b"):
        table.reserve(name, lambda n=name: Turn(n, "start", "sid", tmp_path, None, "p", 1, 0.0))
    with pytest.raises(SubagentError) as busy:
        table.reserve("c", lambda: Turn("c", "start", "sid", tmp_path, None, "p", 1, 0.0))
    assert str(busy.value) == ('refused: max_running=2 sessions are already running (a, b). Wait for one to end with '
                               'status(names=["a", "b"], wait_seconds=30), then start again; or interrupt one of them')
    with pytest.raises(SubagentError) as running:
        table.reserve("a", lambda: Turn("a", "start", "sid", tmp_path, None, "p", 1, 0.0))
    assert "status(name='a', wait_seconds=30) waits for its end, interrupt(name='a') stops it" in str(running.value)
    assert not promises_a_notice(str(running.value))


def test_descriptions_name_the_defaults_in_force(tmp_path):
    listing = {t["name"]: t for t in build_registry(_engine(tmp_path, max_budget_usd=2.5, max_turns=50,
                                                            turn_timeout=900, kill_grace=3)).listing()}
    props = listing["start"]["inputSchema"]["properties"]
    assert props["max_budget_usd"]["description"].endswith("Default: $2.5.")
    assert props["max_turns"]["description"].endswith("Default: 50.")
    assert props["timeout_minutes"]["description"].endswith("Default: 15 minutes.")
    assert "then SIGINT, and SIGKILL 3 s later if it has not ended" in props["timeout_minutes"]["description"]
    assert "SIGKILL if it has not ended 3 s later" in listing["interrupt"]["description"]
    unset_registry = build_registry(_engine(tmp_path / "u", turn_timeout=0, max_turns=0))
    unset = unset_registry.listing()[1]["inputSchema"]["properties"]
    assert [unset[k]["description"].rsplit("Default: ", 1)[1]
            for k in ("max_budget_usd", "max_turns", "timeout_minutes")] == [
        "none (no cap).", "none (no cap).", "none (no limit)."]


def test_the_skill_teaches_waits_refusals_the_todo_channel_defaults_and_worktrees():
    from pathlib import Path

    skill_file = Path(__file__).resolve().parents[2] / "hivesubagent" / "skills" / "claude-subagents" / "SKILL.md"
    skill = skill_file.read_text()
    for needed in ('status(name="fix-lint-api", wait_seconds=30)', "status(names=[", "all=true",
                   "Refused with `max_running`", "No notice comes when it ends", "max_turns=200 timeout_minutes=60",
                   "max_budget_usd=none", "git worktree", "worktree add", "stalled:", "steps=true", "files changed:"):
        assert needed in skill, needed

