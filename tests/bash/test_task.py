"""The state table and the one guarded transition: every allowed edge works, every other edge is refused."""

import itertools
import signal

import pytest

from hivebash.tasks import task as t
from hivebash.tasks.record import record_of


def make(state=t.PENDING):
    task = t.Task(id="x", cmd="true", cwd="/", marker="x:1", seq=1, submitted_at=0.0)
    task.state = state
    return task


def result(state=t.DONE):
    return t.TaskResult(ended_at=1.0, duration=0.5, exit_code=0, state=state)


ALLOWED = {
    (t.PENDING, t.STARTING), (t.PENDING, t.ENDING), (t.PENDING, t.INTERRUPTED),
    (t.STARTING, t.RUNNING), (t.STARTING, t.ENDING),
    (t.RUNNING, t.STOPPING), (t.RUNNING, t.EXITED), (t.RUNNING, t.ENDING), (t.RUNNING, t.INTERRUPTED),
    (t.STOPPING, t.SWEEPING), (t.STOPPING, t.ENDING),
    (t.EXITED, t.ENDING), (t.SWEEPING, t.ENDING),
    (t.ENDING, t.DONE), (t.ENDING, t.TIMED_OUT), (t.ENDING, t.KILLED), (t.ENDING, t.INTERRUPTED),
}


def with_result(state, dst):
    """A task in `state`; an `ending` one already carries the result that says it ends as `dst`."""
    task = make(state)
    if state == t.ENDING:
        task.result = result(dst if dst in t.TERMINAL else t.DONE)
    return task


@pytest.mark.parametrize("src,dst", sorted(itertools.product(t.ALL_STATES, t.ALL_STATES)))
def test_every_edge_is_allowed_or_refused_per_table(src, dst):
    task = with_result(src, dst)
    before = task.result
    ends = dst == t.ENDING or (dst in t.TERMINAL and src != t.ENDING)
    res = result(dst if dst in t.TERMINAL else t.DONE) if ends else None
    if (src, dst) in ALLOWED:
        t.transition(task, dst, res)
        assert task.state == dst
        assert task.result is (res or before)
    else:
        with pytest.raises(t.BadTransition):
            t.transition(task, dst, res)
        assert task.state == src and task.result is before


def test_an_end_needs_its_result_once_and_non_ends_refuse_one():
    with pytest.raises(t.BadTransition):
        t.transition(make(t.RUNNING), t.ENDING)
    with pytest.raises(t.BadTransition):
        t.transition(make(t.PENDING), t.STARTING, result())
    ending = with_result(t.ENDING, t.KILLED)
    with pytest.raises(t.BadTransition):
        t.transition(ending, t.DONE)  # its result says killed
    with pytest.raises(t.BadTransition):
        t.transition(ending, t.KILLED, result(t.KILLED))  # the result came with `ending`


def test_states_are_shown_as_the_six_a_record_keeps():
    task = make(t.STOPPING)
    assert task.shown_state == t.RUNNING and record_of(task)["state"] == t.RUNNING
    t.transition(task, t.ENDING, result(t.KILLED))
    assert task.shown_state == t.KILLED and task.ended and not task.terminal
    assert {t.shown_as(s) for s in t.ALL_STATES - {t.ENDING}} == t.SHOWN


def test_record_round_trips_through_dict():
    task = make(t.RUNNING)
    t.transition(task, t.ENDING, t.TaskResult(ended_at=2.0, duration=1.0, exit_code=3, rusage=t.Rusage(0.1, 0.2, 4096),
                                               state=t.DONE))
    t.transition(task, t.DONE)
    back = t.Task.from_dict(record_of(task) | {"future_field": 1})
    assert back == task and back.result.rusage.cpu_seconds == pytest.approx(0.3) and back.result.state == t.DONE
    assert "state" not in record_of(task)["result"]
    with pytest.raises(ValueError):
        t.Task.from_dict(record_of(task) | {"state": "weird"})
    with pytest.raises(ValueError):
        t.Task.from_dict(record_of(task) | {"state": t.STOPPING})  # no record says an inner state


def test_exit_status_names_signal_deaths_like_bash():
    assert t.exit_status(3 << 8) == (3, None)
    assert t.exit_status(signal.SIGKILL) == (137, "SIGKILL")


def test_end_state_prefers_what_we_asked_for():
    task = make(t.RUNNING)
    assert t.end_state(task, "SIGSEGV") == (t.DONE, "died of SIGSEGV")
    task.kill_signal = "SIGINT"
    assert t.end_state(task, None)[0] == t.KILLED
    task.timeout_secs, task.timed_out = 1.0, True
    assert t.end_state(task, "SIGTERM")[0] == t.TIMED_OUT
