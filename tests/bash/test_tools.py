"""The MCP tool surface through ToolRegistry.call: schemas refuse bad input naming the field (and change
nothing), results carry a stable first line of key=value facts, the tails verbatim, and exact data."""

import os

import pytest
from kit.gate import Gate
from kit.hivebash_testkit import task_ids, wait_until

from common.protocol.argument_errors import ToolArgumentsError
from common.protocol.tools import CallContext
from hivebash.tools import build_registry


@pytest.fixture
def tools(engine):
    return build_registry(engine)


def call(tools, tool_name, **args):
    return tools.call(tool_name, args, CallContext(structured=True))


def test_listing_has_five_tools_with_object_schemas(tools):
    names = [t["name"] for t in tools.listing()]
    assert names == ["run", "status", "send", "kill", "list"]
    assert all(t["inputSchema"]["type"] == "object" for t in tools.listing())


def test_run_inline_text_and_data(tools):
    res = call(tools, "run", cmd="echo out; echo err >&2; exit 2", wait_seconds=10, name="t1")
    first = res.text.splitlines()[0]
    assert first.startswith("id=t1 status=done exit_code=2 duration=") and "cpu=" in first
    assert "max_rss" not in first  # `exit 2` never grows past the daemon's own peak: no figure of its own
    assert "--- stdout: 1 line, 4 bytes ---" in res.text and "\nout\n" in res.text and "\nerr\n" in res.text
    assert res.data["status"] == "done" and res.data["exit_code"] == 2 and res.data["started"] is False
    assert res.data["stdout"]["tail"] == "out\n" and res.data["wait"]["capped"] is False


def test_run_started_answer_and_status_wait(tools, tmp_path):
    gate = Gate(tmp_path)  # "late" comes after the started answer
    res = call(tools, "run", cmd=f"{gate.wait}; echo late", wait_seconds=0, name="bg")
    assert res.text.startswith("task started: id=bg\n") and res.data["started"] is True
    gate.open()
    st = call(tools, "status", id="bg", wait_seconds=10)
    assert st.text.startswith("id=bg status=done exit_code=0") and "late\n" in st.text


def test_cap_is_reported(make_engine):
    tools = build_registry(make_engine(wait_cap=0.2))
    res = call(tools, "run", cmd="sleep 30", wait_seconds=100)
    assert "wait_capped=0.2s(asked 100s)" in res.text and "(wait_seconds=100 was capped at 0.2)" in res.text
    assert res.data["wait"] == res.data["wait"] | {"capped": True, "asked": 100, "seconds": 0.2}
    st = call(tools, "status", id=res.data["id"], wait_seconds=31)
    assert "wait_capped=0.2s(asked 31s)" in st.text.splitlines()[0]
    call(tools, "kill", id=res.data["id"], force=True)


def test_kill_and_list_text(tools):
    call(tools, "run", cmd="sleep 300", name="long", wait_seconds=0)
    k = call(tools, "kill", id="long")
    assert k.text.startswith("id=long action=signalled") and "SIGINT" in k.text and k.data["action"] == "signalled"
    assert call(tools, "status", id="long", wait_seconds=10).data["status"] == "killed"
    call(tools, "run", cmd="echo " + "x" * 300, name="wide", wait_seconds=10)
    lst = call(tools, "list")
    lines = lst.text.splitlines()
    assert lines[0] == "tasks=2 shown=2" and lines[1].split() == ["ID", "STATUS", "AGE", "EXIT", "COMMAND"]
    assert lines[2].split()[:2] == ["wide", "done"] and lines[3].split()[:2] == ["long", "killed"]
    assert len(lines[2]) < 120
    assert [t["id"] for t in call(tools, "list", state="killed").data["tasks"]] == ["long"]
    assert call(tools, "kill", id="wide").data["action"] == "nothing"


def test_binary_output_reaches_text_safely(tools):
    res = call(tools, "run", cmd="printf 'a\\x00b\\xffc'", wait_seconds=10)
    assert "a\\x00b\\xffc\n(no newline at end)" in res.text


SCHEMA_ERRORS = [
    ("run", {}, "cmd: is required"),
    ("run", {"cmd": ""}, "cmd: must be at least 1"),
    ("run", {"cmd": "x" * (64 * 1024 + 1)}, "cmd: must be at most"),
    ("run", {"cmd": "true", "name": "Bad"}, "name: must match"),
    ("run", {"cmd": "true", "name": "x" * 64}, "name: must match"),
    ("run", {"cmd": "true", "name": ".."}, "name: must match"),
    ("run", {"cmd": "true", "timeout_secs": -5}, "timeout_secs: must be >= 1"),
    ("run", {"cmd": "true", "timeout_secs": 1.5}, "timeout_secs: must be of type integer"),
    ("run", {"cmd": "true", "timeout_secs": "10"}, "timeout_secs: must be of type integer"),
    ("run", {"cmd": "true", "wait_seconds": -1}, "wait_seconds: must be >= 0"),
    ("run", {"cmd": "true", "bogus": 1}, "arguments: unknown argument"),
    ("status", {"ids": []}, "ids: must have at least 1 item(s)"),
    ("status", {"ids": ["a", "a"]}, "ids: must not name the same item twice"),
    ("status", {"id": "a", "context": 11}, "context: must be <= 10"),
    ("status", {"id": "a", "stream": "both"}, "stream: must be one of"),
    ("status", {"id": "../etc"}, "id: must match"),
    ("kill", {"id": "ok", "force": "yes"}, "force: must be of type boolean"),
    ("list", {"state": "finished"}, "state: must be one of"),
    ("list", {"limit": 0}, "limit: must be >= 1"),
]


@pytest.mark.parametrize("tool,args,message", SCHEMA_ERRORS, ids=[f"{i}-{e[0]}" for i, e in enumerate(SCHEMA_ERRORS)])
def test_bad_arguments_are_refused_by_schema_and_change_nothing(tools, engine, todos, tool, args, message):
    before = (sorted(os.listdir(engine.store.dir)), task_ids(engine))
    with pytest.raises(ToolArgumentsError) as exc:
        tools.call(tool, args)
    assert message in str(exc.value)
    assert (sorted(os.listdir(engine.store.dir)), task_ids(engine)) == before and todos.calls == []


def test_engine_refusals_are_error_results(tools, engine, tmp_path):
    for name, args, message in [
        ("status", {"id": "nope"}, "id: no task 'nope'"),
        ("status", {}, "id: is required (or ids: a list of task ids)"),
        ("status", {"id": "nope", "ids": ["nope"]}, "ids: cannot be combined with id"),
        ("status", {"id": "nope", "grep": "(x"}, "grep: not a valid Python regular expression"),
        ("status", {"id": "nope", "grep": "x", "from_line": 3}, "from_line: cannot be combined with grep"),
        ("status", {"id": "nope", "context": 2}, "context: goes with grep"),
        ("status", {"ids": ["nope"], "grep": "x"}, "ids: shows one line a task"),
        ("status", {"id": "nope", "wait_for": "[x"}, "wait_for: not a valid Python regular expression"),
        ("run", {"cmd": "true", "wait_for": "(?P<"}, "wait_for: not a valid Python regular expression"),
        ("kill", {"id": "nope"}, "id: no task 'nope'"),
        ("run", {"cmd": "true", "cwd": str(tmp_path / "missing")}, "cwd: "),
        ("run", {"cmd": "   "}, "cmd: is required"),
    ]:
        res = tools.call(name, args)
        assert res.is_error and res.text.startswith(message), res.text
    call(tools, "run", cmd="sleep 300", name="busy", wait_seconds=0)
    res = tools.call("run", {"cmd": "true", "name": "busy"})
    assert res.is_error and ("is still pending" in res.text or "is still running" in res.text), res.text
    call(tools, "kill", id="busy", force=True)
    assert wait_until(lambda: engine.status("busy").view.task.terminal)


DESCRIPTION_BOUND = 1000  # characters: a description the model reads whole, every session


def test_descriptions_teach_and_stay_short(tools, engine, capsys):
    listing = {t["name"]: t for t in tools.listing()}
    with capsys.disabled():
        print("\ntool description sizes (characters): " + ", ".join(
            f"{name} {len(t['description'])}" for name, t in listing.items()) +
            f"; whole listing {len(str(tools.listing()))}")
    assert all(len(t["description"]) <= DESCRIPTION_BOUND for t in listing.values())
    run, status = listing["run"]["description"], listing["status"]["description"]
    assert engine.default_cwd in run and "fresh `bash -c CMD`" in run and "`cd` or `export`" in run
    assert "replaces that task and its output files" in run and "wait_for" in run
    assert '`stdin: "pipe"`' in run and '`"tty"`' in run and "wait_for" in run  # when to take input, and how
    send = listing["send"]["description"]
    for example in ('run(cmd="python3 -i", stdin="tty")', "at the prompt", 'send(id, text="y")', "64 KiB",
                    "what the task printed since this send"):
        assert example in send
    for example in ('`grep: "error|FAIL"`', "`context: 2`", "`from_line: 5000, max_lines: 40`", '`stream: "stderr"`',
                    "`new_only: true`", '`ids: ["a", "b"]`', '`wait_for: "regex"`'):
        assert example in status
