"""The subagent engine and its tools against the REAL claude CLI (2.1.328), talking to our Messages API mock.

Each real claude run costs ~0.4 s idle (a few seconds on a loaded box), so independent sessions run in
parallel inside a test, and one mock server serves the module. Steering is by directives in the prompt (see
mock_messages_api.py): the first turn's prompt is the `trigger`, later ones `continue`'s `prompt`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest
from daemon_harness import wait_until
from kit.subagent_testkit import running_names

from common.notices import promises_a_notice
from common.protocol.argument_errors import ToolArgumentsError
from hivesubagent.tools import build_registry
from hivesubagent.transcripts.sessions import SessionStore

pytestmark = pytest.mark.interop


def wait_mock_saw(mock_api, marker: str, seconds: float = 60.0) -> None:
    """Until the mock received a request whose prompt carries `marker` (claude is then mid-turn)."""
    # another process's progress: nothing to be notified by, so poll
    wait_until(lambda: any(marker in json.dumps(r.body) for r in mock_api.message_requests()), seconds,
               f"the mock to see {marker!r}")


def requests_with(mock_api, marker: str) -> list[dict]:
    return [r.body for r in mock_api.message_requests() if marker in json.dumps(r.body.get("messages"))]


def test_lifecycle_start_status_todo_continue_refusal(engine_factory, claude_bin, real_env, prompt_file, mock_api):
    engine, todos = engine_factory(claude_bin, real_env)
    tools = build_registry(engine)
    started = tools.call("start", {"name": "life", "prompt_file": str(prompt_file),
                                   "trigger": "life-1 MOCK:sleep=2\nMOCK:reply=first answer"})
    assert not started.is_error, started.text
    first_line = started.text.splitlines()[0]
    assert first_line.startswith("state=running name=life session_id=") and f"pid={started.data['pid']}" in first_line
    session_id = started.data["session_id"]

    status = tools.call("status", {"name": "life"})
    assert status.data["running"] is True and status.data["session_id"] == session_id
    assert status.text.startswith("name=life state=") and "running=true" in status.text.splitlines()[0]
    refused = tools.call("continue", {"name": "life", "prompt": "too early"})
    assert refused.is_error and "refused: 'life' is running" in refused.text
    # no harness socket in this engine: no answer promises a todo, each says how to wait instead
    assert not promises_a_notice(started.text) and not promises_a_notice(refused.text)
    assert 'status(name="life", wait_seconds=30) waits for the end' in started.text
    assert "status(name='life', wait_seconds=30) waits for its end" in refused.text
    assert tools.call("start", {"name": "life", "prompt_file": str(prompt_file)}).is_error

    todo = todos.wait_upserts("life")[0]
    outcome = todo["data"]["outcome"]
    assert outcome["outcome"] == "completed" and outcome["result_text"] == "first answer"
    assert outcome["cost_usd"] > 0 and outcome["terminal_reason"] == "completed"
    first = requests_with(mock_api, "life-1")[0]
    assert "PROMPT-FILE-MARKER" in json.dumps(first["system"])  # --append-system-prompt-file reached claude
    transcript = Path(started.data["transcript"])
    titles = [json.loads(line).get("customTitle") for line in transcript.read_text().splitlines()
              if '"custom-title"' in line]
    assert titles and set(titles) == {"life"}

    cont = tools.call("continue",
                      {"name": "life", "prompt": "life-2 MOCK:reply=second answer", "model": "claude-haiku-4-5"})
    assert not cont.is_error and cont.data["session_id"] == session_id and cont.data["turn"] == 2
    second = todos.wait_upserts("life", 2)[1]["data"]
    assert second["outcome"]["outcome"] == "completed" and second["outcome"]["result_text"] == "second answer"
    second_request = requests_with(mock_api, "life-2")[0]
    assert second_request["model"] == "claude-haiku-4-5"
    # continue keeps start's prompt_file instructions: claude's system-prompt snapshot carries them on resume
    assert "PROMPT-FILE-MARKER" in json.dumps(second_request["system"])
    assert "model=claude-haiku-4-5" in cont.text.splitlines()[0]  # known: asked for, so reported
    assert second["outcome"]["total_cost_usd"] == pytest.approx(outcome["total_cost_usd"]
                                                                + second["outcome"]["cost_usd"])

    # what claude 2.1.328 sent (mock_messages_api's docstring): nothing but streamed POST /v1/messages?beta=true
    assert {(r.method, r.path) for r in mock_api.requests} == {("POST", "/v1/messages?beta=true")}
    assert all(r.body["stream"] is True for r in mock_api.requests)
    assert "system" in [m["role"] for m in first["messages"]]  # role "system" inside messages: no strict alternation

    final = tools.call("status", {"name": "life"}).data
    assert final["running"] is False and final["turns"] == 2 and final["model"] == "claude-haiku-4-5"
    assert final["last_turn"]["outcome"] == "completed" and final["last_turn"]["result_text"] == "second answer"
    assert final["total_cost_usd"] == pytest.approx(second["outcome"]["total_cost_usd"])


def test_interrupts_soft_and_forced_two_sessions_at_once(engine_factory, claude_bin, real_env, prompt_file, mock_api):
    engine, todos = engine_factory(claude_bin, real_env)
    tool = 'MOCK:tool=Bash {"command": "echo begin; sleep 41.5; echo end"}'
    soft = engine.start("soft", str(prompt_file), trigger="soft-1 MOCK:sleep=60")
    hard = engine.start("hard", str(prompt_file), trigger=f"hard-1\n{tool}")
    assert running_names(engine) == ["hard", "soft"]
    listing = engine.status()
    assert listing["running"] == 2 and {s["name"] for s in listing["sessions"] if s["running"]} == {"hard", "soft"}
    wait_mock_saw(mock_api, "soft-1")

    # hard: its Bash tool runs `sleep 41.5` in a session of its own; SIGKILL must reach it anyway
    def tool_sleep():
        for proc in psutil.Process(hard["pid"]).children(recursive=True):
            try:
                if proc.cmdline()[:2] == ["sleep", "41.5"]:
                    return proc
            except psutil.Error:
                pass
        return None

    sleeper = wait_until(tool_sleep, 60, "claude's Bash tool to start the sleep")
    assert os.getpgid(sleeper.pid) != hard["pid"]  # outside claude's process group

    soft_answer = build_registry(engine).call("interrupt", {"name": "soft"})
    soft_view = soft_answer.data
    assert soft_view["state"] == "ended" and soft_view["outcome"]["outcome"] == "interrupted"
    # claude 2.1.328 records what the stopped request spent (its cost-state moved): a known figure, never a bare 0
    assert soft_view["outcome"]["cost_usd"] > 0 and " cost_usd=0.0000" in soft_answer.text.splitlines()[0]
    assert list(soft_view["signals"]) == ["SIGINT"]
    hard_view = engine.interrupt("hard", force=True)
    assert hard_view["outcome"]["outcome"] == "killed" and hard_view["signals"] == {"SIGKILL": "interrupt(force=true)"}
    sleeper.wait(10)
    assert not sleeper.is_running()
    assert todos.wait_upserts("soft")[0]["data"]["outcome"]["outcome"] == "interrupted"
    assert todos.wait_upserts("hard")[0]["data"]["outcome"]["outcome"] == "killed"
    assert running_names(engine) == []

    # the interrupted session goes on where it stopped
    engine.continue_("soft", "soft-2 MOCK:reply=back again")
    resumed = todos.wait_upserts("soft", 2)[1]["data"]
    assert resumed["session_id"] == soft["session_id"] and resumed["outcome"]["result_text"] == "back again"
    assert engine.status("soft")["turns"] == 2


def test_restart_of_a_name_archives_and_api_errors_are_errors(engine_factory, claude_bin, real_env,
                                                              prompt_file, mock_api):
    engine, todos = engine_factory(claude_bin, real_env)
    old = engine.start("arch", str(prompt_file), trigger="MOCK:reply=old one")
    failing = engine.start("fails", str(prompt_file), trigger="fails-1 MOCK:fail=500")
    todos.wait_upserts("arch")
    new = engine.start("arch", str(prompt_file), trigger="MOCK:reply=new one")
    assert new["archived"] == [old["transcript"] + ".archived"]
    assert Path(old["transcript"] + ".archived").is_file() and not Path(old["transcript"]).exists()
    assert todos.wait_upserts("arch", 2)[1]["data"]["outcome"]["result_text"] == "new one"
    store = SessionStore(engine.workdir, engine.env)
    assert [p.name for p in store.find_all("arch")] == [f"{new['session_id']}.jsonl"]
    status = engine.status("arch")
    assert status["session_id"] == new["session_id"] and status["turns"] == 1

    err = todos.wait_upserts("fails")[0]["data"]["outcome"]
    assert err["outcome"] == "error" and err["api_error_status"] == 500 and "API Error: 500" in err["result_text"]
    assert engine.status("fails")["last_turn"]["outcome"] == "error"
    assert failing["session_id"] == engine.status("fails")["session_id"]


def test_bad_inputs_are_clear_errors(engine_factory, claude_bin, real_env, prompt_file, tmp_path):
    engine, todos = engine_factory(claude_bin, real_env)
    tools = build_registry(engine)
    with pytest.raises(ToolArgumentsError, match=r"name: must match"):
        tools.call("start", {"name": "Bad Name", "prompt_file": str(prompt_file)})
    with pytest.raises(ToolArgumentsError, match=r"prompt_file: is required"):
        tools.call("start", {"name": "ok"})
    with pytest.raises(ToolArgumentsError, match=r"model: must match"):
        tools.call("start", {"name": "ok", "prompt_file": str(prompt_file), "model": "--dangerous"})
    with pytest.raises(ToolArgumentsError, match=r"force: must be of type boolean"):
        tools.call("interrupt", {"name": "ok", "force": "yes"})
    cases = {
        ("start", json.dumps({"name": "ok", "prompt_file": str(tmp_path / "missing.md")})): "prompt_file: ",
        ("start", json.dumps({"name": "ok", "prompt_file": str(tmp_path)})): "is a directory, not a regular file",
        ("continue", json.dumps({"name": "nobody", "prompt": "hi"})): "name: no session named 'nobody'",
        ("interrupt", json.dumps({"name": "nobody"})): "name: 'nobody' is not running",
        ("status", json.dumps({"name": "nobody"})): "name: no session named 'nobody'",
    }
    for (tool, args), message in cases.items():
        result = tools.call(tool, json.loads(args))
        assert result.is_error and message in result.text, (tool, result.text)
        assert result.data["error"] == result.text
    assert running_names(engine) == [] and todos.calls == []
    assert not (engine.sessions.project_dir.exists() and any(engine.sessions.project_dir.iterdir()))


def test_long_workdir_slug_matches_claude(engine_factory, claude_bin, real_env, prompt_file, tmp_path):
    """Over 200 characters claude cuts the slug and appends base36(|javaHash(path)|): we must find its folder."""
    deep = tmp_path / ("d" * 60) / ("e" * 60) / ("f" * 60) / "work"
    deep.mkdir(parents=True)
    engine, todos = engine_factory(claude_bin, real_env, workdir=deep)
    view = engine.start("deep", str(prompt_file), trigger="MOCK:reply=deep")
    todos.wait_upserts("deep")
    created = [p for p in engine.sessions.projects_dir.iterdir() if p.name.startswith(engine.sessions.slug()[:200])]
    assert [p.name for p in created] == [engine.sessions.slug()]
    assert len(engine.sessions.slug()) > 200
    assert Path(view["transcript"]).is_file()
    assert engine.status("deep")["last_turn"]["result_text"] == "deep"
