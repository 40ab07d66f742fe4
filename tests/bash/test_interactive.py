"""Interactive tasks with real programs: `run(stdin="pipe"|"tty")` and `send` (hivebash/verbs/send.py, task_input.py,
terminal.py). No fakes: bash's `read -p`, `python3 -i`, `getpass`, `cat`, `sleep` and `ls --color=auto` run on
a real pipe or pseudo-terminal, and every answer is read as the model would read it."""

import json
import os
import select
import signal
import sys
import threading
import time

import pytest
from kit.gate import Gate
from kit.hivebash_testkit import marked_processes, settings, wait_until

from common.protocol.argument_errors import ToolArgumentsError
from common.protocol.tools import CallContext
from hivebash.engine import Engine
from hivebash.errors import EngineError
from hivebash.tools import build_registry
from hivebash.verbs.requests import SEND_LIMIT

AGENT, OPERATOR = CallContext(structured=True), CallContext(structured=True, operator=True)
ANSWER_BOUND = 8 * 1024
PROMPT = ">>> $"
# A tty task that puts its terminal in raw mode (ctrl-d is then a byte it reads, not an end of file) and reads
# nothing until its gate (argv[1]) opens; then it reads until it has the count written to argv[2], and says
# how many bytes it read and how many of them were ctrl-d.
RAW_READER = """
import os, select, sys, time, tty
tty.setraw(0)
print("ready", flush=True)
gate, told = sys.argv[1:]
while not os.path.exists(gate):
    time.sleep(0.01)
got = b""
while True:
    if select.select([0], [], [], 0.05)[0]:
        got += os.read(0, 1 << 16)
    elif os.path.exists(told) and len(got) >= int(open(told).read()):
        break
print(f"read={len(got)} ctrl-d={got.count(4)}", flush=True)
"""


@pytest.fixture
def tools(engine):
    return build_registry(engine)


def call(tools, tool, ctx=AGENT, **args):
    res = tools.call(tool, args, ctx)
    assert len(res.text.encode()) < ANSWER_BOUND, res.text
    return res


def refused(tools, tool, **args):
    res = tools.call(tool, args, AGENT)
    assert res.is_error, res.text
    return res.text


def marker_of(tools, task_id):
    path = call(tools, "status", id=task_id).data["stdout"]["path"].replace(".out", ".json")
    with open(path) as f:
        return json.load(f)["marker"]


def test_read_p_answered_on_a_pipe_and_on_a_tty(tools):
    cmd = 'read -p "Continue? [y/N] " a; echo "got $a"'
    call(tools, "run", cmd=cmd, stdin="pipe", name="rp", wait_seconds=0)
    res = call(tools, "send", id="rp", text="y", wait_seconds=10)
    assert res.data["status"] == "done" and res.data["exit_code"] == 0, res.text
    assert "got y\n" in res.text and "sent=2B" in res.text.splitlines()[0]
    # On a terminal bash shows the prompt (a line without a newline): wait_for sees it.
    started = call(tools, "run", cmd=cmd, stdin="tty", name="rt", wait_for=r"\[y/N\] $", wait_seconds=10)
    assert "wait_for matched" in started.text and "Continue? [y/N]" in started.text, started.text
    res = call(tools, "send", id="rt", text="y", wait_seconds=10)
    assert res.data["status"] == "done" and "got y" in res.text, res.text


def test_a_python_repl_over_four_sends(tools):
    started = call(tools, "run", cmd="python3 -i -q", stdin="tty", name="py", wait_for=PROMPT, wait_seconds=20)
    assert started.data["status"] == "running" and "stdin=tty" not in started.text.splitlines()[0]  # (run's form)
    assert 'send(id="py"' in started.text
    define = call(tools, "send", id="py", text="def double(x):\n    return 2 * x\n", wait_for=PROMPT, wait_seconds=20)
    assert define.data["wait_for"]["matched"] is not None, define.text
    assign = call(tools, "send", id="py", text="value = double(21) + 0.5", wait_for=PROMPT, wait_seconds=20)
    assert "Traceback" not in assign.text, assign.text
    show = call(tools, "send", id="py", text="value", wait_for=PROMPT, wait_seconds=20)
    first, body = show.text.split("\n", 1)
    assert first.startswith("id=py status=running stdin=tty") and "\n42.5\n" in body, show.text
    assert "\x1b" not in show.text  # readline's terminal sequences are cleaned away
    assert 'send(id="py", text="...")' in show.text  # the next call
    end = call(tools, "send", id="py", text="exit()", wait_seconds=20)
    assert end.data["status"] == "done" and end.data["exit_code"] == 0, end.text
    assert "The task has ended" in end.text


def test_getpass_reads_the_terminal_without_echo(tools):
    call(tools, "run", cmd="python3 -c 'import getpass; print(\"got\", getpass.getpass())'", stdin="tty", name="gp",
         wait_for="Password: $", wait_seconds=20)
    res = call(tools, "send", id="gp", text="hunter2", wait_seconds=20)
    assert res.data["status"] == "done" and res.data["exit_code"] == 0, res.text
    assert "got hunter2" in res.text and res.text.count("hunter2") == 1  # the terminal did not echo it
    assert "Warning" not in res.text and "EOFError" not in res.text


def test_cat_ends_at_eof_on_a_pipe_and_on_a_tty(tools):
    call(tools, "run", cmd="cat", stdin="pipe", name="cp", wait_seconds=0)
    res = call(tools, "send", id="cp", text="hello", eof=True, wait_seconds=10)
    assert res.data["status"] == "done" and res.data["eof"] is True and "hello\n" in res.text, res.text
    call(tools, "run", cmd="cat", stdin="tty", name="ct", wait_seconds=0)
    res = call(tools, "send", id="ct", text="hi", eof=True, wait_seconds=10)
    assert res.data["status"] == "done" and res.text.count("hi") >= 2, res.text  # the echo, then cat's copy



def test_a_tty_that_takes_part_of_the_text_gets_no_ctrl_d(tools, engine, tmp_path, monkeypatch):
    """The text is cut where the terminal's buffer filled: a ctrl-d typed after the cut would end what the task
    reads mid-text, so none is typed and the answer says eof false. The terminal is made to have room again
    right after it refused the rest of the text (its task starts reading just then: a moment no task can be
    timed to meet, so the test's hook on the terminal's write opens the task's gate at it)."""
    script, gate, told = tmp_path / "reader.py", Gate(tmp_path), tmp_path / "told"
    script.write_text(RAW_READER)
    started = call(tools, "run", cmd=f"{sys.executable} {script} {gate.path} {told}", stdin="tty", name="raw",
                   wait_for="^ready", wait_seconds=20)
    assert "wait_for matched" in started.text, started.text
    with engine.registry.locked() as tasks:
        terminal = tasks.get("raw").runner.input.terminal
    write = terminal.write

    def room_once_full(data):
        taken = write(data)
        if taken == 0 and not gate.path.exists():
            gate.open()
            room = select.poll()
            room.register(terminal.master, select.POLLOUT)
            wait_until(lambda: room.poll(0), 10, "the task to read its terminal")
        return taken

    monkeypatch.setattr(terminal, "write", room_once_full)
    res = call(tools, "send", id="raw", text="x" * 30000, enter=False, eof=True, wait_seconds=0)
    assert gate.path.exists(), f"the terminal took all {res.data['sent_bytes']} bytes: nothing was cut"
    sent = res.data["sent_bytes"]
    assert 0 < sent < 30000 and res.data["eof"] is False, res.text
    assert res.text.splitlines()[0].endswith(f"sent={sent}B of 30000B waited=0.00s"), res.text  # no " eof"
    (tmp_path / "told.tmp").write_text(str(sent))
    os.replace(tmp_path / "told.tmp", told)
    end = call(tools, "status", id="raw", wait_seconds=20)
    assert end.data["status"] == "done" and f"read={sent} ctrl-d=0\n" in end.text, end.text

def test_ctrl_c_on_a_tty_interrupts_as_the_terminal_would(tools):
    call(tools, "run", cmd="sleep 300", stdin="tty", name="sl", wait_seconds=0)
    res = call(tools, "send", id="sl", keys=["ctrl-c"], wait_seconds=10)
    assert res.data["status"] == "done" and res.data["signal"] == "SIGINT", res.text  # not a kill: the terminal's
    assert wait_until(lambda: marked_processes(marker_of(tools, "sl")) == [])


def test_a_colour_listing_keeps_its_colour_in_the_file_only(tools, tmp_path):
    (tmp_path / "adir").mkdir()
    res = call(tools, "run", cmd="ls --color=auto", cwd=str(tmp_path), stdin="tty", name="ls", wait_seconds=10)
    assert res.data["status"] == "done" and "adir" in res.text, res.text
    with open(res.data["stdout"]["path"], "rb") as f:
        assert b"\x1b[" in f.read()
    assert "\x1b" not in res.text and "\\x1b" not in res.text
    assert "stdin=tty: the terminal's output, stderr included, is all in stdout" in res.text
    assert os.path.getsize(res.data["stderr"]["path"]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pipe", "tty"])
def test_a_task_that_never_reads_is_never_waited_on(tools, kind):
    call(tools, "run", cmd="sleep 300", stdin=kind, name="deaf", wait_seconds=0)
    chunk = "x" * (60 * 1024)
    answers = []
    for _ in range(4):
        done = threading.Event()
        results = {}

        def send(results=results, done=done):
            results["send"] = call(tools, "send", id="deaf", text=chunk, enter=False, wait_seconds=0.5)
            done.set()

        thread = threading.Thread(target=send)
        thread.start()
        status = call(tools, "status", id="deaf")  # answers while the send waits: no thread is blocked
        assert status.data["status"] == "running" and not done.is_set()
        thread.join(10)
        assert done.is_set()
        answers.append(results["send"])
    accepted = [a.data["sent_bytes"] for a in answers]
    assert all(a.data["asked_bytes"] == len(chunk) for a in answers) and sum(accepted) < 4 * len(chunk), accepted
    short = [a for a in answers if a.data["sent_bytes"] < len(chunk)]
    assert short and all("the rest was NOT sent" in a.text for a in short), short[0].text
    if kind == "pipe":  # the pipe is full; a terminal keeps taking keys and drops what its full line cannot hold
        assert accepted[-1] == 0, accepted
    call(tools, "kill", id="deaf", force=True)



def test_the_output_a_send_answer_cut_is_what_new_only_shows_next(tools):
    call(tools, "run", cmd="read go; seq 1 3000", stdin="pipe", name="long", wait_seconds=0)
    res = call(tools, "send", id="long", text="go", wait_seconds=10)  # 13.9 KiB: over a send's 5 KiB budget
    shown = res.data["output"]["stdout"]
    assert res.data["status"] == "done" and shown["first_line"] == 1 and shown["last_line"] < 3000, res.text
    assert 'status(id="long", new_only=true) shows the next' in res.text
    seen = [int(line) for line in res.text.splitlines() if line.isdigit()]
    for _ in range(10):
        rest = call(tools, "status", id="long", new_only=True)
        if "--- stdout: nothing new" in rest.text:
            break
        assert f"--- stdout: new lines {seen[-1] + 1:,}-" in rest.text, rest.text
        seen += [int(line) for line in rest.text.splitlines() if line.isdigit()]
    assert seen == list(range(1, 3001)), "a line the send's answer cut was never shown, or shown twice"


def test_a_send_presses_at_most_100_keys(tools, engine):
    call(tools, "run", cmd="sleep 300", stdin="tty", name="keys", wait_seconds=0)
    pressed = call(tools, "send", id="keys", keys=["space"] * 100, wait_seconds=0)
    assert not pressed.is_error and pressed.data["sent_bytes"] == 100, pressed.text
    assert engine.send("keys", keys=["space"] * 100, wait_seconds=0).accepted == 100
    with pytest.raises(ToolArgumentsError, match="keys: must have at most 100 items"):
        tools.call("send", {"id": "keys", "keys": ["space"] * 101, "wait_seconds": 0}, AGENT)
    with pytest.raises(EngineError, match=r"keys: must be a list of 1 to 100 key names"):  # every caller's check
        engine.send("keys", keys=["space"] * 101, wait_seconds=0)
    call(tools, "kill", id="keys", force=True)

def test_every_refusal_names_the_field_and_what_to_do(tools, engine):
    call(tools, "run", cmd="sleep 300", name="plain", wait_seconds=0)
    text = refused(tools, "send", id="plain", text="x")
    assert 'stdin "null"' in text and 'stdin: "pipe"' in text and 'stdin: "tty"' in text
    call(tools, "run", cmd="true", stdin="pipe", name="over", wait_seconds=10)
    assert "has ended (status=done)" in refused(tools, "send", id="over", text="x")
    call(tools, "run", cmd="sleep 300", stdin="pipe", name="piped", wait_seconds=0)
    assert "keys:" in refused(tools, "send", id="piped", keys=["ctrl-c"])
    assert "tty" in refused(tools, "send", id="piped", keys=["tab"])
    call(tools, "run", cmd="sleep 300", stdin="tty", name="term", wait_seconds=0)
    text = refused(tools, "send", id="term", keys=["ctrl-c", "hyper-x"])
    assert "keys[1]" in text and "'hyper-x'" in text and "ctrl-c" in text
    assert "nothing to send" in refused(tools, "send", id="term")
    text = refused(tools, "send", id="term", text="y" * SEND_LIMIT)  # with its Enter, one byte too many
    assert "at most 65536 bytes" in text and "redirect" in text
    with pytest.raises(ToolArgumentsError, match="stdin: must be one of 'null', 'pipe', 'tty'"):
        tools.call("run", {"cmd": "cat", "stdin": "file"}, AGENT)
    with pytest.raises(EngineError, match='stdin: must be "null"'):  # the engine's own check, for every caller
        engine.run("cat", stdin="file")
    assert "no task 'nobody'" in refused(tools, "send", id="nobody", text="x")
    for task_id in ("plain", "piped", "term"):
        call(tools, "kill", id=task_id, force=True)


def test_a_pending_task_takes_no_input_yet(make_engine):
    tools = build_registry(make_engine(max_running=1))
    call(tools, "run", cmd="sleep 300", name="first", wait_seconds=0)
    call(tools, "run", cmd="cat", stdin="pipe", name="queued", wait_seconds=0)
    text = refused(tools, "send", id="queued", text="x")
    assert "is pending and has not started yet" in text
    call(tools, "kill", id="first", force=True)
    res = call(tools, "send", id="queued", text="late", eof=True, wait_seconds=0) if wait_until(
        lambda: call(tools, "status", id="queued").data["status"] == "running") else None
    assert res is not None and res.data["sent_bytes"] == 5


def test_a_forced_kill_of_a_tty_task_leaves_no_process(tools):
    call(tools, "run", cmd="sleep 301 & setsid sleep 302 & python3 -i", stdin="tty", name="many", wait_for=">>> $",
         wait_seconds=20)
    marker = marker_of(tools, "many")
    assert wait_until(lambda: len(marked_processes(marker)) >= 3)
    call(tools, "kill", id="many", force=True)
    assert call(tools, "status", id="many", wait_seconds=10).data["status"] == "killed"
    assert wait_until(lambda: marked_processes(marker) == [], timeout=5)


def test_list_and_status_show_which_tasks_take_input(tools):
    call(tools, "run", cmd="sleep 300", stdin="tty", name="in-tty", wait_seconds=0)
    call(tools, "run", cmd="true", name="no-input", wait_seconds=10)
    listing = call(tools, "list").text.splitlines()
    assert "STDIN" in listing[1] and any(line.startswith("in-tty") and " tty " in line for line in listing)
    assert any(line.startswith("no-input") and " - " in line for line in listing)
    status = call(tools, "status", id="in-tty")
    assert "stdin=tty" in status.text.splitlines()[0] and status.data["stdin"] == "tty"
    assert call(tools, "status", id="no-input").data["stdin"] == "null"
    call(tools, "kill", id="in-tty", force=True)


def test_an_operators_send_takes_no_todo_and_moves_no_cursor(tools, todos):
    call(tools, "run", cmd="cat", stdin="pipe", name="op", wait_seconds=0)
    call(tools, "status", id="op")  # the agent has seen it (empty) up to here
    call(tools, "send", OPERATOR, id="op", text="from-the-operator", wait_for="operator", wait_seconds=10)
    assert "from-the-operator" in call(tools, "status", id="op", new_only=True).text  # still new to the agent
    res = call(tools, "send", OPERATOR, id="op", eof=True, wait_seconds=10)
    assert res.data["status"] == "done"
    # The operator saw the end: the agent still gets its completion todo, and nothing clears it.
    ended = todos.wait_upserts("op", 1)[-1]
    assert "finished" in ended["body"] and ("clear", "op") not in todos.for_key("op"), todos.for_key("op")


@pytest.mark.slow
def test_a_restart_ends_an_interactive_task_interrupted(engine_process):
    ep = engine_process()
    view = ep.call({"op": "run", "cmd": "python3 -i", "stdin": "tty", "wait_seconds": 0})
    with open(view["stdout"]["path"].replace(".out", ".json")) as f:
        marker = json.load(f)["marker"]
    assert wait_until(lambda: len(marked_processes(marker)) >= 1)
    os.kill(ep.proc.pid, signal.SIGKILL)
    ep.proc.wait()
    again = engine_process()
    assert again.call({"op": "status", "id": view["id"]})["status"] == "interrupted"
    assert wait_until(lambda: marked_processes(marker) == [], timeout=5)


def test_a_sends_answer_comes_at_the_echo_not_at_the_window(tools):
    call(tools, "run", cmd="cat", stdin="tty", name="echo", wait_seconds=0)
    started = time.monotonic()
    res = call(tools, "send", id="echo", text="ping-1", wait_for="ping-1", wait_seconds=20)
    assert res.data["wait_for"]["matched"] is not None and time.monotonic() - started < 15, res.text
    call(tools, "kill", id="echo", force=True)


def test_a_timeout_ends_a_tty_task_as_any_other(tools):
    res = call(tools, "run", cmd="python3 -i", stdin="tty", name="slow", timeout_secs=1, wait_seconds=0)
    marker = marker_of(tools, "slow")
    res = call(tools, "status", id="slow", wait_seconds=20)
    if res.data["status"] == "running":  # the wait ended at the REPL's prompt: the next one, told, is for the end
        assert res.data["waiting_for_input"] == ">>> ", res.text
        res = call(tools, "status", id="slow", wait_seconds=20)
    assert res.data["status"] == "timed_out", res.text
    assert wait_until(lambda: marked_processes(marker) == [], timeout=5)
    assert "has ended (status=timed_out)" in refused(tools, "send", id="slow", text="1")


def test_a_tty_tasks_todo_points_at_its_one_output_file(tools, todos, tmp_path):
    gate = Gate(tmp_path)  # held until its running todo is out
    call(tools, "run", cmd=f"echo on-the-terminal; {gate.wait}", stdin="tty", name="told", wait_seconds=0)
    todos.wait_upserts("told")
    gate.open()
    running, ended = (u["body"] for u in todos.wait_upserts("told", 2)[:2])
    assert "told.out" in running and "told.err" not in running, running
    body = ended
    assert "output (a terminal: stderr included): Read(" in body and "told.out" in body and "told.err" not in body, body


def test_a_tty_task_runs_on_when_its_output_fills_the_disk(small_disk, todos, caplog, tmp_path):
    """A terminal's output that the full disk cannot take is dropped, and the task keeps its terminal: once there
    is room again it goes on printing and reading (a copier that gave up used to hang up on the task)."""
    engine = Engine(settings(small_disk.root, max_state_bytes="0"), todos)  # the full disk, not the quota
    engine.open()
    try:
        tools = build_registry(engine)
        # The prompt waits behind a gate until the room is made: freed while the flood still ran, the rest of
        # the flood could fill the disk again and the prompt be dropped too (seen under load).
        flooded, gate = tmp_path / "flooded", Gate(tmp_path)
        flood = (f"head -c 3000000 /dev/zero | tr '\\0' x; echo; touch {flooded}; {gate.wait}; printf 'ready> '; "
                 "read a; echo \"got $a\"")
        call(tools, "run", cmd=flood, stdin="tty", name="flood", wait_seconds=0)
        assert wait_until(flooded.exists, timeout=30)
        assert wait_until(lambda: "output is dropped until there is room" in caplog.text, timeout=20), caplog.text
        os.truncate(engine.store.path("flood", "out"), 0)  # the operator frees the disk
        gate.open()
        ready = call(tools, "status", id="flood", wait_for="ready> $", wait_seconds=20)
        assert ready.data["status"] == "running" and ready.data["wait_for"]["matched"] is not None, ready.text
        res = call(tools, "send", id="flood", text="y", wait_seconds=10)
        assert res.data["status"] == "done" and res.data["exit_code"] == 0 and "got y" in res.text, res.text
        # The copier's own writes were refused: its note says so exactly, though the disk has room again by now.
        assert res.data["note"] == ("part of its terminal's output was dropped: the state disk was full (No space "
                                    "left on device)"), res.data["note"]
    finally:
        engine.shutdown(timeout=5)
