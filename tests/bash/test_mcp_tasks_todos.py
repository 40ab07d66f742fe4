"""One notice, never two, never none: a task a client tracks by its handle, against the reference harness sink.
The poll that returns the end delivers it (no todo stays); a client that polled recently is waited for, two poll
intervals, before the todo goes; a client that went away still gets the todo."""

import sys
from pathlib import Path

import pytest
from daemon_harness import sink_todos, wait_until
from kit.gate import Gate
from kit.tasks_client import HANDLE, ended, get, run

DAEMON = str(Path(sys.executable).parent / "hive-bash-daemon")


@pytest.fixture
def told_daemon(daemon_factory, tmp_path, sink):
    return daemon_factory([DAEMON, "--state-dir", str(tmp_path / "state"), "--agent-socket", str(sink)])


def _todo(sink, key):
    return next((t for t in sink_todos(sink, strict=False) if t["key"] == key), None)


def test_a_poll_that_returns_the_end_delivers_it_and_no_completion_todo_stays(told_daemon, sink, tmp_path):
    gate = Gate(tmp_path)
    handle = run(told_daemon.url, f"{gate.wait}; echo finished", wait_seconds=0)["taskId"]
    task_id = HANDLE.match(handle)["id"]
    assert get(told_daemon.url, handle)["status"] == "working"  # the client polls: its poll will deliver the end
    # A run of a client without the extension, started after it, gets its "running" todo; the tracked task none
    # (its client shows it running).
    plain = run(told_daemon.url, gate.wait, tasks=False, wait_seconds=0)["content"][0]["text"].split()[2][3:]
    wait_until(lambda: _todo(sink, plain), 10, "the running todo of the plain run")
    assert _todo(sink, task_id) is None
    gate.open()
    end = ended(told_daemon.url, handle)
    assert "finished" in end["result"]["content"][0]["text"]
    # A completion todo held for the client's poll would go out at the latest when the daemon stops (it sends
    # every held one then): none does.
    told_daemon.stop()
    assert _todo(sink, task_id) is None


def test_a_client_that_stops_polling_still_gets_the_todo_after_two_intervals(told_daemon, sink, tmp_path):
    gate = Gate(tmp_path)
    handle = run(told_daemon.url, f"{gate.wait}; echo finished", wait_seconds=0)["taskId"]
    task_id = HANDLE.match(handle)["id"]
    interval = get(told_daemon.url, handle)["pollIntervalMs"] / 1000
    gate.open()
    todo = wait_until(lambda: (t := _todo(sink, task_id)) and "status=done" in t["summary"] and t,
                      10 + 3 * interval, "the completion todo")
    assert "finished" not in todo["summary"]
    end = get(told_daemon.url, handle)  # the client comes back: its poll still completes the handle, and clears it
    assert end["status"] == "completed"
    wait_until(lambda: _todo(sink, task_id) is None, 10, "the todo cleared by the poll")


def test_a_client_that_never_polled_gets_the_todo_at_once(told_daemon, sink, tmp_path):
    gate = Gate(tmp_path)
    handle = run(told_daemon.url, f"{gate.wait}", wait_seconds=0)["taskId"]
    task_id = HANDLE.match(handle)["id"]
    gate.open()
    wait_until(lambda: (t := _todo(sink, task_id)) and "status=done" in t["summary"], 10, "the completion todo")
