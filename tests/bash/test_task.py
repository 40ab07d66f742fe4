"""The state table and the one guarded transition: every allowed edge works, every other edge is refused."""

import itertools
import signal

import pytest

from hivebash import task as t
from hivebash.records import record_of


def make(state=t.PENDING):
    task = t.Task(id="x", cmd="true", cwd="/", marker="x:1", seq=1, submitted_at=0.0)
    task.state = state
    return task


def result():
    return t.TaskResult(ended_at=1.0, duration=0.5, exit_code=0)


ALLOWED = {
    (t.PENDING, t.RUNNING), (t.PENDING, t.KILLED), (t.PENDING, t.INTERRUPTED),
    (t.RUNNING, t.DONE), (t.RUNNING, t.TIMED_OUT), (t.RUNNING, t.KILLED), (t.RUNNING, t.INTERRUPTED),
}


@pytest.mark.parametrize("src,dst", sorted(itertools.product(t.STATES, t.STATES)))
def test_every_edge_is_allowed_or_refused_per_table(src, dst):
    task = make(src)
    res = result() if dst in t.TERMINAL else None
    if (src, dst) in ALLOWED:
        t.transition(task, dst, res)
        assert task.state == dst
        assert task.result is res
    else:
        with pytest.raises(t.BadTransition):
            t.transition(task, dst, res)
        assert task.state == src and task.result is None


def test_terminal_needs_result_and_non_terminal_refuses_one():
    with pytest.raises(t.BadTransition):
        t.transition(make(t.RUNNING), t.DONE)
    with pytest.raises(t.BadTransition):
        t.transition(make(t.PENDING), t.RUNNING, result())


def test_record_round_trips_through_dict():
    task = make(t.RUNNING)
    t.transition(task, t.DONE, t.TaskResult(ended_at=2.0, duration=1.0, exit_code=3, rusage=t.Rusage(0.1, 0.2, 4096)))
    back = t.Task.from_dict(record_of(task) | {"future_field": 1})
    assert back == task and back.result.rusage.cpu_seconds == pytest.approx(0.3)
    with pytest.raises(ValueError):
        t.Task.from_dict(record_of(task) | {"state": "weird"})


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
