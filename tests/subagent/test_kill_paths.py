"""A turn's interrupt, escalation, forced-kill, exit and shutdown paths, walked through the recording fake of the
process seam (tests/kit/fake_ops.py), as tests/bash/test_kill_paths.py walks the bash daemon's: which signal goes to
claude's group, which descendants are stopped, in which order, and what the turn ends as. A fake because these
check the order of operations, which with a real claude depends on timing; the same paths with the real CLI are
in test_interop_claude.py (soft and forced interrupts, a forced one while claude's Bash tool runs `sleep`)."""

import json
import signal

import pytest
from daemon_harness import wait_until
from kit.fake_ops import FIRST_PID, RecordingOps

from common.process_seam import ProcInfo
from hivesubagent.tools import build_registry

INT, KILL = signal.SIGINT, signal.SIGKILL
INIT = json.dumps({"type": "system", "subtype": "init", "session_id": "s", "model": "m"}).encode() + b"\n"
RESULT = json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "done", "num_turns": 1,
                     "total_cost_usd": 0.01}).encode() + b"\n"
TOOL = ProcInfo(FIRST_PID + 500, 1.0)  # a tool process of claude's in a session of its own (its Bash tool)


@pytest.fixture
def ops():
    fake = RecordingOps()
    fake.on_spawn = lambda leader: fake.say(leader.pid, INIT)  # claude says it runs at once
    return fake


@pytest.fixture
def turn(engine_factory, fake_env, ops, tmp_path):
    """start(name="t") on a fake claude; (engine, todos, the leader's pid)."""
    engine, todos = engine_factory("claude", fake_env, ops=ops, kill_grace=0.3)
    prompt = tmp_path / "prompt.md"
    prompt.write_text("work")
    assert engine.start("t", str(prompt))["state"] == "running"
    pid = ops.ops("spawn")[-1][1]
    ops.descendants[pid] = [TOOL]
    return engine, todos, pid


def group_signals(ops, pid):
    return [c[2] for c in ops.ops("signal_group") if c[1] == pid]


KILLS = [
    # claude ignores, force?, signals its group gets (the last SIGKILL is the sweep at the exit), outcome, tool stopped
    ("soft, claude stops", set(), False, [INT, KILL], "interrupted", False),
    ("soft, claude ignores it: SIGKILL after kill_grace", {INT}, False, [INT, KILL, KILL], "killed", True),
    ("forced", set(), True, [KILL, KILL], "killed", True),
]


@pytest.mark.parametrize("ignores,force,signals,outcome,tool_stopped",
                         [k[1:] for k in KILLS], ids=[k[0] for k in KILLS])
def test_interrupt_a_running_turn(turn, ops, ignores, force, signals, outcome, tool_stopped):
    engine, todos, pid = turn
    ops.ignore = ignores
    view = engine.interrupt("t", force=force)
    assert view["outcome"]["outcome"] == outcome, view
    assert group_signals(ops, pid) == signals
    assert (("stop", [TOOL.pid], True) in ops.calls) == tool_stopped
    if tool_stopped:  # its descendants were found before its group died
        assert ops.calls.index(("tree", pid)) < ops.calls.index(("signal_group", pid, KILL))
    assert ops.ops("reap") == [("reap", pid)]
    # the end's todo follows the end the interrupt's answer waited for
    wait_until(lambda: [c[0] for c in todos.calls if c[1] == "t"][-1] == "upsert", 10, "the end's todo")


def test_a_turn_that_ends_by_itself_gets_only_the_sweep(turn, ops):
    engine, todos, pid = turn
    ops.say(pid, RESULT)
    ops.exit(pid, 0)
    assert ops.wait_for_call(lambda c: c[0] == "reap") == ("reap", pid)
    upsert = wait_until(lambda: next((c for c in todos.calls if c[0] == "upsert" and c[1] == "t"), None), 10,
                        "its todo")
    assert "completed" in upsert[2], upsert
    assert group_signals(ops, pid) == [KILL] and ops.ops("tree") == []


def test_shutdown_interrupts_then_kills_what_ignores_sigint(turn, ops):
    engine, todos, pid = turn
    ops.ignore = {INT}
    engine.shutdown()
    sent = group_signals(ops, pid)  # the kill_grace timer and shutdown's own escalation may both send SIGKILL
    assert sent[0] == INT and set(sent[1:]) == {KILL} and len(sent) >= 3, sent
    assert ("stop", [TOOL.pid], True) in ops.calls and ops.ops("reap") == [("reap", pid)]


def _take_every_slot(slots) -> int:
    taken = 0
    while slots.try_acquire():
        taken += 1
    return taken


def test_an_interrupt_with_every_wait_slot_taken_answers_at_once_saying_what_was_sent_and_the_next_call(turn, ops):
    """The slots are taken by hand (as other calls' waits would): the answer may not wait, so it says the SIGINT
    went out, that the turn still runs, why this call did not wait, the SIGKILL still due and the one next call."""
    engine, todos, pid = turn
    ops.ignore = {INT}  # still running when the answer is made; the kill_grace SIGKILL ends it
    tools = build_registry(engine)
    taken = _take_every_slot(engine.slots)
    try:
        answer = tools.call("interrupt", {"name": "t"})
    finally:
        for _ in range(taken):
            engine.slots.release()
    text = answer.text
    assert answer.data["wait"]["skipped"] is True and answer.data["state"] == "stopping", answer.data
    assert " wait_skipped=busy" in text.splitlines()[0] and not answer.is_error, text
    assert ("signals sent: SIGINT (interrupt); the turn is still running: this call did not wait for its end: every "
            "inline-wait slot is taken by other calls.") in text, text
    assert ('SIGKILL follows if it is still running 0.3s after the SIGINT; '
            'interrupt(name="t", force=true) sends it now.') in text
    assert 'status(name="t", wait_seconds=30) waits for' in text, text
    assert "(do not retry at once: do other work first, or interrupt the turns you no longer wait for)" in text, text
    assert len(text.encode()) < 8192 and group_signals(ops, pid)[0] == INT
    assert ops.wait_for_call(lambda c: c[0] == "reap") == ("reap", pid)  # the SIGKILL that was due came
    assert group_signals(ops, pid)[:2] == [INT, KILL]


def test_an_interrupt_whose_turn_outlives_the_wait_says_how_long_it_waited(turn, ops, monkeypatch):
    """A claude that does not die even of SIGKILL within the wait (stuck in the kernel): the answer says the
    signal went out and how long it waited, with no SIGKILL left to promise, and the call that waits on."""
    from hivesubagent import engine as engine_module

    engine, todos, pid = turn
    monkeypatch.setattr(engine_module, "AFTER_KILL_SECONDS", 0.2)
    exits = ops.exit
    monkeypatch.setattr(ops, "exit", lambda pid, status: None)
    answer = build_registry(engine).call("interrupt", {"name": "t", "force": True})
    exits(pid, KILL)  # now it dies, for the teardown
    text = answer.text
    assert answer.data["wait"]["skipped"] is False and answer.data["wait"]["kill_grace"] is None, answer.data
    assert ("signals sent: SIGKILL (interrupt(force=true)); "
            "the turn is still running: it had not ended after waiting 0.") in text
    assert "SIGKILL follows" not in text and "wait_skipped" not in text, text
    assert 'status(name="t", wait_seconds=30) waits for its outcome.' in text or "waits for it." in text, text
