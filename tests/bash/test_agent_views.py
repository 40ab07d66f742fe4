"""The agent's view of its tasks through the tools: exact notices (only the agent's reads clear a todo, a
restart keeps that true, no todo is promised without a harness socket), status views and the new_only
cursor, waits on several tasks and on a line of output, and what `task started` shows."""

import threading

import pytest
from kit.gate import Gate
from kit.hivebash_testkit import ended_mid_wait, settings, wait_until

from common.protocol.tools import CallContext
from hivebash.answers import inline_wait
from hivebash.engine import Engine
from hivebash.tools import build_registry

AGENT, OPERATOR = CallContext(structured=True), CallContext(structured=True, operator=True)
BOUND = 8 * 1024


@pytest.fixture
def socket_settings(tmp_path):
    """A configured harness socket (nothing listens: the todos go to the recorder) makes `notices` true."""
    return settings(tmp_path, agent_socket=tmp_path / "agent.sock")


@pytest.fixture
def agent_tools(socket_settings, todos):
    engine = Engine(socket_settings, todos)
    engine.open()
    yield build_registry(engine), engine
    engine.shutdown(timeout=5)


def call(tools, tool, ctx=AGENT, **args):
    result = tools.call(tool, args, ctx)
    assert not result.is_error, result.text
    assert len(result.text.encode()) < BOUND, len(result.text.encode())
    return result


def finish_in_background(tools, engine, todos, name, cmd="echo done"):
    call(tools, "run", cmd=cmd, name=name, wait_seconds=0)
    # A task this quick gets its completion as its only todo (no "running" one a moment before it).
    assert "status=done" in todos.wait_upserts(name, 1)[-1]["summary"]
    assert wait_until(lambda: engine.status(name, operator=True).view.task.terminal)


def test_only_the_agents_status_clears_a_completion_todo(agent_tools, todos):
    tools, engine = agent_tools
    finish_in_background(tools, engine, todos, "tv1")
    call(tools, "status", OPERATOR, id="tv1")
    call(tools, "status", OPERATOR, id="tv1", wait_seconds=1)
    call(tools, "list", OPERATOR)
    assert ("clear", "tv1") not in todos.for_key("tv1")
    call(tools, "status", id="tv1")
    assert todos.for_key("tv1")[-1] == ("clear", "tv1")


def test_an_operators_inline_wait_leaves_the_completion_todo(agent_tools, todos, tmp_path):
    tools, engine = agent_tools
    gate = Gate(tmp_path)  # held until its running todo is out and the operator's call waits
    call(tools, "run", cmd=gate.wait, name="opw", wait_seconds=0)
    assert todos.wait_upserts("opw", 1)[0]["data"]["status"] == "running"
    res = ended_mid_wait(engine, "opw", gate, lambda: call(tools, "status", OPERATOR, id="opw", wait_seconds=20))
    assert res.data["status"] == "done"
    assert "status=done" in todos.wait_upserts("opw", 2)[-1]["summary"]


def test_after_a_restart_the_agents_status_still_clears(socket_settings, todos):
    first = Engine(socket_settings, todos)
    first.open()
    tools = build_registry(first)
    finish_in_background(tools, first, todos, "before")
    first.shutdown(timeout=5)
    again = Engine(socket_settings, todos)
    again.open()
    try:
        call(build_registry(again), "status", id="before")
        assert todos.for_key("before")[-1] == ("clear", "before")
    finally:
        again.shutdown(timeout=5)


def test_without_a_socket_no_answer_promises_a_todo(engine):
    tools = build_registry(engine)
    listing = {t["name"]: t["description"] for t in tools.listing()}
    assert "todo" not in listing["run"] and "check with status" in listing["run"]
    res = call(tools, "run", cmd="sleep 30", name="nosock", wait_seconds=0)
    assert "todo" not in res.text and 'check it with status(id="nosock", wait_seconds=30)' in res.text
    call(tools, "kill", id="nosock", force=True)


def test_task_started_says_running_and_shows_the_output_so_far(agent_tools):
    tools, engine = agent_tools
    res = call(tools, "run", cmd="echo '\x1b[32mready\x1b[0m'; echo warming up >&2; sleep 30", name="srv",
               wait_seconds=1)
    assert res.text.splitlines()[1].startswith("status=running")
    assert "--- stdout: 1 line, 15 bytes ---\nready\n" in res.text and "\nwarming up\n" in res.text
    assert "its completion will surface as a todo" in res.text
    now = call(tools, "run", cmd="sleep 30", name="now", wait_seconds=0)
    assert now.data["status"] == "running"  # given a slot, spawned before the answer
    for name in ("srv", "now"):
        call(tools, "kill", id=name, force=True)


def test_new_only_shows_what_the_agent_was_not_shown(agent_tools, tmp_path):
    tools, engine = agent_tools
    before, gate = Gate(tmp_path), Gate(tmp_path)  # "first" comes after run's answer (which would show it)
    call(tools, "run", cmd=f"{before.wait}; echo first; {gate.wait}; echo second", name="grow", wait_seconds=0)
    before.open()
    assert wait_until(lambda: "first" in call(tools, "status", OPERATOR, id="grow").data["stdout"]["tail"])
    assert "first" in call(tools, "status", OPERATOR, id="grow", new_only=True).text  # the operator moves nothing
    shown = call(tools, "status", id="grow")
    assert "first" in shown.text
    gate.open()
    call(tools, "status", OPERATOR, id="grow", wait_seconds=20)
    new = call(tools, "status", id="grow", new_only=True).text.split("\ncwd: ")[1]
    assert "--- stdout: new line 2 (7 bytes new; 2 lines, 13 bytes in all) ---" in new
    assert "\nsecond\n" in new and "first" not in new
    assert "nothing new" in call(tools, "status", id="grow", new_only=True, stream="stdout").text


def test_new_only_and_wait_for_see_what_follows_a_truncation(agent_tools, tmp_path, monkeypatch):
    """Issue 25, hole 3: the agent empties a running task's output below its cursor (and below a wait_for's
    watch); what the task writes next is found by wait_for and shown by new_only, and both say so."""
    tools, engine = agent_tools
    gate, out = tmp_path / "gate", engine.store.file("cut", "out")
    watching, made = threading.Event(), inline_wait.watches_for
    monkeypatch.setattr(inline_wait, "watches_for", lambda *a, **k: (made(*a, **k), watching.set())[0])
    call(tools, "run", cmd=f"seq 1 60; while [ ! -e {gate} ]; do sleep 0.02; done; echo 'ready after'; sleep 30",
         name="cut", wait_seconds=0)
    assert wait_until(lambda: "60" in call(tools, "status", OPERATOR, id="cut").data["stdout"]["tail"])
    call(tools, "status", id="cut")  # the agent was shown it up to byte 171
    answer: list = []
    waiter = threading.Thread(target=lambda: answer.append(call(tools, "status", id="cut", wait_for="^ready",
                                                                wait_seconds=20)))
    waiter.start()
    assert watching.wait(10)  # the watch stands at byte 171
    with open(out, "r+b") as f:
        f.truncate(0)
    gate.touch()
    waiter.join(20)
    res = answer[0]
    assert "wait_for matched (cut, stdout line 1): ready after" in res.text, res.text
    assert "(truncated while watched: cut stdout; watched again from its start)" in res.text
    assert res.data["wait_for"]["truncated"] == ["cut stdout"]
    call(tools, "kill", id="cut", force=True)
    call(tools, "status", OPERATOR, id="cut", wait_seconds=20)
    with open(out, "r+b") as f:  # below the cursor that answer moved to the file's new end (12 bytes)
        f.truncate(0)
        f.write(b"late\n")
    new = call(tools, "status", id="cut", new_only=True, stream="stdout").text
    assert ("--- stdout: truncated (was 12 bytes when last shown, now 5); "
            "new line 1 (5 bytes new; 1 line, 5 bytes in all) ---") in new
    assert new.endswith("\nlate\n")


def test_grep_and_window_views_and_stream(agent_tools):
    tools, engine = agent_tools
    call(tools, "run", cmd="seq 1 20000; echo 'E: broken' >&2", name="seq", wait_seconds=20)
    res = call(tools, "status", id="seq", grep="^1234[0-9]$", context=1)
    assert "--- grep '^1234[0-9]$' in stdout: 10 matching lines ---" in res.text
    assert "stdout:12339- 12339\nstdout:12340: 12340" in res.text
    assert res.data["view"]["streams"]["stdout"]["matches"] == 10
    res = call(tools, "status", id="seq", from_line=19999, max_lines=5, stream="stdout")
    assert ("--- stdout lines 19,999-20,000 of 20,000 (the end of the output) ---\n"
            "19999: 19999\n20000: 20000\n") in res.text
    assert "stderr" not in res.text.split("cwd:")[1]
    assert "E: broken" in call(tools, "status", id="seq", stream="stderr").text


def test_status_of_several_ids_answers_when_the_first_ends(agent_tools, todos, tmp_path):
    tools, engine = agent_tools
    gate = Gate(tmp_path)  # quick ends once the call waits on both
    call(tools, "run", cmd=f"{gate.wait}; exit 4", name="quick", wait_seconds=0)
    call(tools, "run", cmd="sleep 30", name="slow", wait_seconds=0)
    res = ended_mid_wait(engine, "quick", gate, lambda: call(tools, "status", ids=["slow", "quick"], wait_seconds=20))
    lines = res.text.splitlines()
    assert lines[0].startswith("id=slow status=running") and lines[1].startswith("id=quick status=done exit_code=4")
    assert res.data["ended"] == ["quick"] and "ended during this call: quick; still running: slow" in res.text
    assert not [c for c in todos.for_key("quick") if c[0] == "upsert" and "status=done" in c[2]]  # delivered inline
    call(tools, "kill", id="slow", force=True)


def test_wait_for_ends_the_wait_at_a_new_matching_line(agent_tools, todos):
    tools, engine = agent_tools
    res = call(tools, "run", cmd="echo booting; sleep 0.3; echo 'listening on :8080'; sleep 30", name="web",
               wait_for="listening on", wait_seconds=20)
    assert res.text.startswith("task started: id=web\nstatus=running")
    assert "wait_for matched (web, stdout line 2): listening on :8080" in res.text
    assert res.data["wait"]["waited"] < 15 and todos.wait_upserts("web")[0]["data"]["status"] == "running"
    # status: only a line written after the call counts
    res = call(tools, "status", id="web", wait_for="listening", wait_seconds=0.5)
    assert "wait_for 'listening': no line you were not shown yet matched; stdout line 2 matched earlier" in res.text
    assert res.data["status"] == "running"
    call(tools, "kill", id="web", force=True)
    ended = call(tools, "run", cmd="echo nothing here", name="none", wait_for="never", wait_seconds=20)
    assert ended.data["status"] == "done" and "no line you were not shown yet matched" in ended.text
