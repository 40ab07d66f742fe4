"""Issue 27: the traps a model met in the calls that follow a first answer, each reproduced through the official
Python SDK client against a real hive-bash-daemon (the answer's text is what matters), then fixed."""

from __future__ import annotations

import threading

import pytest
from daemon_harness import start_daemon, todo_sink, wait_until
from kit.gate import Gate
from kit.sdk_agent import SdkAgent, bash_daemon_argv, socketless_bash_daemon

from common.notices import Notices, promises_a_notice
from hivesubagent import tools as subagent_tools


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """A daemon without a harness socket (no todo can reach the agent)."""
    with socketless_bash_daemon(tmp_path_factory.mktemp("traps")) as d:
        yield d


@pytest.fixture(scope="module")
def agent(daemon):
    a = SdkAgent(daemon.url)
    yield a
    a.close()


@pytest.fixture(scope="module")
def noticed(tmp_path_factory):
    """A daemon whose completions go to the reference harness sink, and its agent."""
    root = tmp_path_factory.mktemp("noticed")
    with todo_sink() as sock:
        d = start_daemon(bash_daemon_argv(root / "state", "--agent-socket", str(sock)), root)
        a = SdkAgent(d.url)
        yield a
        a.close()
        d.stop()


# ----- deliverable 5 and 11: no promised todo without a socket; the server's instructions ---------------------

def test_without_a_socket_kill_and_every_description_promise_no_todo(agent):
    for name, tool in agent.tools().items():
        assert not promises_a_notice(tool["description"]), (name, tool["description"])
    agent.call("run", cmd="sleep 30", name="k5", wait_seconds=0)
    text = agent.call("kill", id="k5", wait_seconds=0)
    assert not promises_a_notice(text), text
    assert 'status(id="k5", wait_seconds=5) shows its end' in text
    assert not promises_a_notice(agent.instructions)


def test_the_instructions_say_how_to_work_with_each_server(agent, noticed, daemon):
    legacy = SdkAgent(daemon.url, mode="legacy")  # the initialize handshake carries them too
    legacy.close()
    assert legacy.instructions == agent.instructions
    for text in (agent.instructions, noticed.instructions):
        assert "already runs its command in the background" in text and "do not end `cmd` with `&`" in text
        assert "not with `Read` of an output file" in text
    assert "reports its end as a todo" in noticed.instructions
    assert "No completion notice reaches you (no harness socket is configured)" in agent.instructions
    assert "todo" in noticed.tools()["kill"]["description"]


def test_the_subagent_instructions_follow_the_same_rule():
    with_socket = subagent_tools.instructions(Notices(True))
    without = subagent_tools.instructions(Notices(False))
    assert "arrives as a todo" in with_socket and not promises_a_notice(without)
    assert "in the background" in without and "`status(name" in without  # the call that waits for it
    assert subagent_tools.build_registry(None).instructions == with_socket


def test_a_text_that_breaks_the_rule_is_refused():
    with pytest.raises(ValueError, match="promises a todo"):
        Notices(False).say("x", "its end arrives as a todo")
    assert Notices(True).say("a todo comes", "check with status") == "a todo comes"


# ----- deliverable 1: wait_for sees a line printed before the call, and says where an earlier one was -------------

def test_wait_for_matches_a_ready_line_printed_between_two_calls(agent, daemon, tmp_path):
    gate = tmp_path / "gate1"
    text = agent.call("run", cmd=f"until [ -e {gate} ]; do sleep 0.02; done; echo Server ready; sleep 60",
                      name="srv1", wait_for="ready", wait_seconds=0.3)
    assert "wait_for 'ready': no line you were not shown yet matched" in text
    assert 'still waiting: status(id="srv1", wait_for="ready", wait_seconds=30) waits on' in text
    gate.touch()
    out = daemon.state / "bash-tasks" / "srv1.out"
    wait_until(lambda: b"ready" in out.read_bytes(), 20, "the ready line")  # printed, never shown to the agent
    text = agent.call("status", id="srv1", wait_for="ready", wait_seconds=20)  # the line came before this call
    assert "wait_for matched (srv1, stdout line 1): Server ready" in text.splitlines()[1], text
    again = agent.call("status", id="srv1", wait_for="ready", wait_seconds=0.3)  # now it was shown
    assert "stdout line 1 matched earlier (shown before): Server ready" in again.splitlines()[1], again
    agent.call("kill", id="srv1", force=True)


# ----- deliverable 2: a trailing `&` ---------------------------------------------------------------------------

def test_a_trailing_ampersand_is_waited_on_and_said_in_every_answer(agent):
    text = agent.call("run", cmd="(sleep 1; echo ready; sleep 30) &", name="amp", wait_for="ready", wait_seconds=20)
    lines = text.splitlines()
    assert lines[0].startswith("id=amp status=done exit_code=0") and "leftover_processes=1" in lines[0], text
    assert any(line.startswith("the shell exited; 1 process it started still runs and writes to its output")
               for line in lines), text
    assert "wait_for matched (amp, stdout line 1): ready" in text
    assert "the shell exited; 1 process" in agent.call("status", id="amp")
    listing = agent.call("list")
    assert any(line.startswith("amp ") and "done+1" in line for line in listing.splitlines()), listing
    assert "(+N: the shell exited, N processes it started still run; kill(id) stops them)" in listing
    assert "do not end `cmd` with `&`" in agent.tools()["run"]["description"]
    agent.call("kill", id="amp", force=True)


# ----- deliverables 3 and 4: line numbers everywhere; new_only delivers what was cut -----------------------------

def test_last_lines_line_counts_and_windows_past_the_end(agent):
    text = agent.call("run", cmd="seq 1 100000", name="lines", wait_seconds=20)
    assert "--- stdout: 100,000 lines, 575.1KiB; last " in text and "(lines 99," in text, text
    last = agent.call("status", id="lines", max_lines=20)
    assert "--- stdout lines 99,981-100,000 of 100,000 (the end of the output) ---\n99981: 99981\n" in last, last
    assert agent.call("status", id="lines", from_line=-2, max_lines=1).count("\n99999: 99999\n") == 1
    past = agent.call("status", id="lines", from_line=160000, stream="stdout")
    assert "--- stdout: no line 160,000 (the output has 100,000 lines; max_lines alone reads the last ones) ---" in past
    few = agent.call("status", id="lines", tail_lines=3)
    assert "--- stdout: 100,000 lines, 575.1KiB; last 3 shown (lines 99,998-100,000)" in few and few.endswith(
        "99998\n99999\n100000\n--- stderr: empty ---\n"), few


def test_new_only_delivers_the_lines_a_tail_cut(agent):
    text = agent.call("run", cmd="seq 1 100; sleep 30", name="cutoff", wait_seconds=1)
    assert "last 10 shown (lines 91-100)" in text, text
    new = agent.call("status", id="cutoff", new_only=True)
    assert "--- stdout: new lines 1-100 (292 bytes new; 100 lines, 292 bytes in all) ---\n1\n2\n" in new, new
    assert "nothing new (100 lines" in agent.call("status", id="cutoff", new_only=True)
    agent.call("kill", id="cutoff", force=True)


def test_new_only_of_a_long_output_says_which_lines_are_left_and_how_to_see_them(agent):
    agent.call("run", cmd="seq 1 5000; sleep 30", name="chatty", wait_seconds=0)
    first = agent.call("status", id="chatty", new_only=True, wait_for="^5000$", wait_seconds=20)
    head = next(line for line in first.splitlines() if line.startswith("--- stdout: new lines 1-"))
    shown_to = int(head.split("new lines 1-")[1].split(" ")[0].replace(",", ""))
    assert f"lines {shown_to + 1:,}-5,000" in head and 'status(id="chatty", new_only=true) shows the next' in head, head
    nxt = agent.call("status", id="chatty", new_only=True)
    assert f"--- stdout: new lines {shown_to + 1:,}-" in nxt and f"\n{shown_to + 1}\n" in f"\n{nxt}"
    agent.call("kill", id="chatty", force=True)


# ----- deliverable 6: several tasks -----------------------------------------------------------------------------

@pytest.mark.slow
def test_status_of_several_waits_for_all_and_an_ended_one_ends_no_wait(agent, tmp_path):
    half, one, waits = Gate(tmp_path), Gate(tmp_path), threading.Event()  # half ends mid-wait, one after it
    agent.call("run", cmd="exit 3", name="early", wait_seconds=20)
    agent.call("run", cmd=f"{half.wait}; echo half", name="half", wait_seconds=0)
    agent.call("run", cmd=f"{one.wait}; echo one", name="one", wait_seconds=0)
    answer = agent.call_later("status", waits, ids=["early", "half", "one"], wait_seconds=20)
    assert waits.wait(20), "no progress from the waiting status"
    half.open()
    text = agent.text(answer.result(30))
    one.open()
    assert "id=half status=done" in text and "id=one status=running" in text, text  # early ended no wait
    assert "  stdout| half\n" in text
    assert ('ended during this call: half; ended before it: early; still running: one; '
            'status(id="one", wait_seconds=30)') in text
    agent.call("run", cmd="sleep 0.3", name="a2", wait_seconds=0)
    agent.call("run", cmd="sleep 0.8", name="b2", wait_seconds=0)
    both = agent.call("status", ids=["a2", "b2"], all=True, wait_seconds=20)
    assert "id=a2 status=done" in both and "id=b2 status=done" in both and "all ended" in both, both
    assert "all: goes with ids" in agent.call("status", id="a2", all=True, error=True)


# ----- deliverable 7: a soft kill that is ignored is visible; kill's short wait ------------------------------------

def test_an_ignored_sigint_is_said_by_kill_status_and_list(agent):
    agent.call("run", cmd="trap '' INT; echo armed; sleep 60", name="deaf", wait_for="armed", wait_seconds=20)
    text = agent.call("kill", id="deaf", wait_seconds=0.5)
    assert "still running 0.5" in text and 'kill(id="deaf", force=true) sends SIGKILL' in text, text
    status = agent.call("status", id="deaf")
    assert "SIGINT sent " in status and 's ago; still running: kill(id="deaf", force=true)' in status, status
    listing = agent.call("list", state="running")
    assert any(line.startswith("deaf ") and "running!" in line for line in listing.splitlines()), listing
    assert "deaf!: SIGINT sent " in listing
    forced = agent.call("kill", id="deaf", force=True)
    assert "; it ended within " in forced and "status=killed exit_code=137" in forced, forced
    quick = agent.call("run", cmd="sleep 60", name="soft", wait_seconds=0)
    assert "task started" in quick
    # SIGINT ends sleep: the answer says so.
    assert "sent SIGINT to the process group of task soft; it ended within " in agent.call("kill", id="soft")


# ----- deliverable 8: list is bounded and paged -------------------------------------------------------------------

@pytest.mark.slow
def test_list_of_a_thousand_tasks_stays_under_8_kib_and_pages(tmp_path):
    from kit.hivebash_testkit import settings, wait_idle

    from common.protocol.tools import CallContext
    from hivebash.engine import Engine
    from hivebash.tools import build_registry

    engine = Engine(settings(tmp_path, max_running=64), None)
    engine.open()
    try:
        tools = build_registry(engine)
        for i in range(1000):
            tools.call("run",
                       {"cmd": f"true {i} with a longer command line to fill the column to its end", "wait_seconds": 0})
        assert wait_idle(engine, 60)
        res = tools.call("list", {"limit": 1000}, CallContext())
        assert len(res.text.encode()) < 8 * 1024 and res.text.startswith("tasks=1000 shown="), res.text[:200]
        shown = res.data["shown"]
        assert 50 < shown < 1000 and f"{1000 - shown:,} more: list(offset={shown}) shows the next page" in res.text
        page = tools.call("list", {"limit": 1000, "offset": shown}, CallContext())
        assert page.text.startswith("tasks=1000 shown=") and f"from offset {shown}" in page.text.splitlines()[0]
        assert page.data["tasks"][0]["id"] != res.data["tasks"][-1]["id"] and len(page.text.encode()) < 8 * 1024
    finally:
        engine.shutdown(timeout=10)


# ----- deliverables 9 and 10: the smaller traps; fewer bytes for the same knowledge --------------------------------

def test_an_unknown_argument_names_the_nearest_known_one(agent):
    refused = agent.call("run", error=True, cmd="true", timeout=5)
    assert "unknown argument(s) not allowed: 'timeout' (did you mean 'timeout_secs'?)" in refused, refused


@pytest.mark.slow
def test_a_queue_place_and_a_busy_wait_each_say_what_to_do(tmp_path):
    from kit.hivebash_testkit import settings

    from common.protocol.tools import CallContext
    from hivebash.engine import Engine
    from hivebash.tools import build_registry

    engine = Engine(settings(tmp_path, max_running=1, max_inline_waits=1), None)
    engine.open()
    try:
        tools = build_registry(engine)
        tools.call("run", {"cmd": "sleep 30", "name": "first", "wait_seconds": 0}, CallContext())
        queued = tools.call("run", {"cmd": "echo later", "name": "later", "wait_seconds": 0}, CallContext()).text
        assert queued.startswith("task queued: id=later\nstatus=pending"), queued
        assert "queued: place 1 in the queue" in queued and "It runs once a slot frees" in queued, queued
        assert "It keeps running" not in queued
        import threading
        waiting = threading.Thread(target=tools.call, args=("status", {"id": "first", "wait_seconds": 3}))
        waiting.start()
        assert wait_until(lambda: engine.rooms.answers.slots.try_acquire() is False or _release(engine),
                          5, "a taken slot")
        busy = tools.call("status", {"id": "first", "wait_seconds": 3}, CallContext()).text
        assert "wait_skipped=busy" in busy and "do not retry at once" in busy, busy
        waiting.join()
    finally:
        engine.shutdown(timeout=10)


def _release(engine) -> bool:
    engine.rooms.answers.slots.release()
    return False


def test_a_failed_builds_error_line_and_polls_without_cmd(agent):
    build = ("for i in $(seq 1 20000); do echo \"[ OK ] compiling unit $i\"; "
             "[ $i = 7000 ] && echo 'src/x.c:12: error: missing symbol'; done; exit 2")
    text = agent.call("run", cmd=build, name="build27", wait_seconds=30)
    assert text.startswith("id=build27 status=done exit_code=2"), text
    assert "--- lines above the tails that look like the failure (error|fail|traceback|exception|panic) ---\n" \
           "stdout:7001: src/x.c:12: error: missing symbol\n" in text, text
    agent.call("run", cmd="while true; do echo tick; sleep 0.1; done", name="chat27", wait_seconds=0)
    agent.call("status", id="chat27", wait_for="tick", wait_seconds=20)
    agent.call("status", id="chat27", wait_for="tick", wait_seconds=20)
    poll = agent.call("status", id="chat27", tail_lines=2)
    assert "cmd:" not in poll and "cwd:" not in poll and poll.count("\ntick") == 2, poll
    agent.call("kill", id="chat27", force=True)
    assert "cmd: while true" in agent.call("status", id="chat27")  # an ended task's answer names it again
