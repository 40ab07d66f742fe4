"""Kill, cancel, timeout, leftover, shutdown and restart paths, walked through a recording process-operations
fake (fake_ops.py): which signal goes where, in which order, and what the task ends as. The same paths with
real processes: test_engine.py and test_engine_process.py."""

import json
import signal
import threading

import pytest
from kit.fake_ops import RecordingOps
from kit.hivebash_testkit import settings, shell_exited, wait_until

from hivebash.engine import Engine
from hivebash.tasks.record import record_of
from hivebash.tasks.task import Task

INT, TERM, KILL = signal.SIGINT, signal.SIGTERM, signal.SIGKILL


@pytest.fixture
def ops():
    return RecordingOps()


def start(engine, ops, name, cmd="work", **kwargs):
    """Run a task in the background; return the pid of its (fake) leader once spawned."""
    engine.run(cmd, name=name, wait_seconds=0, **kwargs)
    call = ops.wait_for_call(lambda c: c[0] == "spawn" and c[2] == cmd)
    assert call is not None, f"{name} was not spawned"
    return call[1]


def group_signals(ops, pid):
    return [c[2] for c in ops.ops("signal_group") if c[1] == pid]


def ended(engine, task_id):
    task = engine.status(task_id, wait_seconds=10).view.task
    assert task.terminal, f"{task_id} did not end"
    return task


KILLS = [
    # leader ignores, kills asked (force?), signals its group gets, end state, signal it died of
    ("graceful", set(), [False], [INT], "killed", "SIGINT"),
    ("forced", set(), [True], [KILL], "killed", "SIGKILL"),
    ("trapped, then forced", {INT}, [False, True], [INT, KILL], "killed", "SIGKILL"),
]


@pytest.mark.slow
@pytest.mark.parametrize("ignores,forces,signals,state,died_of", [k[1:] for k in KILLS], ids=[k[0] for k in KILLS])
def test_kill_a_running_task(make_engine, ops, ignores, forces, signals, state, died_of):
    engine = make_engine(ops=ops)
    ops.ignore = ignores
    pid = start(engine, ops, "t")
    for force in forces:
        assert engine.kill("t", force=force).action in ("signalled", "nothing")
    task = ended(engine, "t")
    assert group_signals(ops, pid) == signals
    assert (task.state, task.result.signal, task.result.exit_code) == (state, died_of, 128 + signals[-1])
    assert ops.ops("reap") == [("reap", pid)]


def test_kill_a_pending_task_cancels_it_without_a_process(make_engine, ops):
    engine = make_engine(ops=ops, max_running=1)
    first = start(engine, ops, "first")
    engine.run("queued", name="queued", wait_seconds=0)
    outcome = engine.kill("queued")
    assert outcome.action == "cancelled" and outcome.view.task.state == "killed"
    assert json.loads((engine.store.dir / "queued.json").read_text())["state"] == "killed"
    ops.exit(first, 0)
    assert ended(engine, "first").state == "done"
    assert [c[2] for c in ops.ops("spawn")] == ["work"] and group_signals(ops, first) == []


@pytest.mark.slow
def test_kill_while_starting_signals_the_group_once_it_exists(make_engine, ops):
    engine = make_engine(ops=ops)
    ops.spawn_gate.clear()  # the thread that starts the task is inside spawn
    starter = threading.Thread(target=engine.run, args=("work",), kwargs={"name": "t", "wait_seconds": 0})
    starter.start()
    assert ops.wait_for_call(lambda c: c[0] == "spawn_begins") is not None
    outcome = engine.kill("t")
    assert outcome.action == "signalled" and ops.ops("signal_group") == []
    ops.spawn_gate.set()
    starter.join(10)
    task = ended(engine, "t")
    pid = ops.ops("spawn")[0][1]
    assert group_signals(ops, pid) == [INT] and task.state == "killed"


@pytest.mark.slow
def test_force_kill_in_the_grace_escalates_the_sweep_at_once(make_engine, ops):
    engine = make_engine(ops=ops, kill_grace=30)
    ops.hold_stop = True
    left = ops.left_behind("t", 2)
    pid = start(engine, ops, "t")
    engine.kill("t")  # the leader dies of SIGINT; what it left is stopped with a 30 s grace
    assert ops.wait_for_call(lambda c: c[0] == "stop") == ("stop", left, False)  # the sweep is in its grace
    assert shell_exited(engine, "t")
    outcome = engine.kill("t", force=True)
    assert outcome.action == "signalled" and "goes to the processes it left behind" in outcome.message
    task = ended(engine, "t")
    assert group_signals(ops, pid) == [INT]  # never the group again once its leader exited
    assert ops.ops("stop") == [("stop", left, False)] and ops.ops("escalate") == [("escalate", left)]
    assert task.state == "killed"


TIMEOUTS = [
    # leader ignores, signals its group gets, signal it died of
    ("exits on SIGTERM", set(), [TERM], "SIGTERM"),
    ("ignores SIGTERM", {TERM}, [TERM, KILL], "SIGKILL"),
]


@pytest.mark.parametrize("ignores,signals,died_of", [t[1:] for t in TIMEOUTS], ids=[t[0] for t in TIMEOUTS])
def test_timeout(make_engine, ops, ignores, signals, died_of):
    engine = make_engine(ops=ops, kill_grace=0.2)
    ops.ignore = ignores
    pid = start(engine, ops, "t", timeout_secs=0.2)
    task = ended(engine, "t")
    assert group_signals(ops, pid) == signals
    assert (task.state, task.result.signal, task.result.note) == ("timed_out", died_of, "timed out after 0.2s")


def test_leftovers_of_a_natural_exit_are_reported_and_kill_stops_them(make_engine, ops):
    engine = make_engine(ops=ops)
    left = ops.left_behind("t", 2)
    pid = start(engine, ops, "t")
    ops.exit(pid, 0)
    assert ended(engine, "t").state == "done"
    assert wait_until(lambda: engine.status("t").view.leftovers == left)
    outcome = engine.kill("t")
    assert outcome.action == "leftovers" and outcome.view.task.state == "done"
    assert ops.wait_for_call(lambda c: c[0] == "stop") == ("stop", left, False)
    assert wait_until(lambda: engine.status("t").view.leftovers == [])
    assert engine.kill("t").action == "nothing"
    assert group_signals(ops, pid) == []


def test_kill_of_a_finished_task_without_leftovers_does_nothing(make_engine, ops):
    engine = make_engine(ops=ops)
    pid = start(engine, ops, "t")
    ops.exit(pid, 3 << 8)
    task = ended(engine, "t")
    assert (task.state, task.result.exit_code) == ("done", 3)
    before = list(ops.calls)
    assert engine.kill("t", force=True).action == "nothing"
    assert ops.calls == before


def test_shutdown_kills_running_cancels_pending_and_sweeps(make_engine, ops):
    engine = make_engine(ops=ops, max_running=1)
    pid = start(engine, ops, "running")
    left = ops.left_behind("running", 2)  # in sessions of their own: out of the group kill's reach
    engine.run("queued", name="queued", wait_seconds=0)
    engine.shutdown(timeout=10)
    assert group_signals(ops, pid) == [KILL]
    assert [c[2] for c in ops.ops("spawn")] == ["work"]
    for name in ("running", "queued"):
        assert engine.status(name).view.task.state == "interrupted"
    assert ops.ops("stop")[-1] == ("stop", left, True)  # the final sweep stops them, forced
    assert ops.processes_of("running") == []


def test_restart_stops_what_a_dead_daemon_left_and_records_interrupted(tmp_path, ops):
    left = ops.left_behind("old", 1)
    task = Task(id="old", cmd="sleep 300", cwd="/", marker="old:n", seq=1, submitted_at=0.0,
                state="running", pid=left[0])
    engine = Engine(settings(tmp_path), ops=ops)
    engine.store.save_dict("old", record_of(task))
    engine.open()
    try:
        assert ops.ops("find")[0] == ("find", ["old:n"], (None,))
        assert ops.ops("stop") == [("stop", left, True)]
        view = engine.status("old").view
        assert view.task.state == "interrupted" and "while the task was running" in view.task.result.note
    finally:
        engine.shutdown(timeout=5)


def test_a_kill_with_every_wait_slot_taken_says_it_did_not_wait_not_that_sigint_was_ignored(make_engine, ops):
    """The slots are taken by hand, as other calls' waits would: the kill's short wait cannot run, so the answer
    says the signal went out and that it did not wait, with the call that shows the end; it must not read as
    a task that ignored SIGINT (that is said only after a real wait)."""
    from hivebash.answers.texts import kill_result

    engine = make_engine(ops=ops)
    ops.ignore = {INT}  # still running when the answer is made
    start(engine, ops, "t")
    taken = 0
    while engine.slots.try_acquire():
        taken += 1
    try:
        answer = kill_result(engine.kill("t"))
    finally:
        for _ in range(taken):
            engine.slots.release()
    first, message = answer.text.splitlines()[:2]
    assert first.endswith(" wait_skipped=busy") and answer.data["wait_skipped"] is True, answer.text
    assert message.startswith("sent SIGINT to the process group of task t; not waited for its end: every inline-wait "
                              "slot is taken by other calls; do not retry at once: do other work first, or kill tasks "
                              'you no longer wait for; then status(id="t", wait_seconds=5) shows its end'), message
    assert "ignores" not in message and "0.00s later" not in message, message
    assert engine.kill("t", force=True).action == "signalled" and ended(engine, "t").state == "killed"
