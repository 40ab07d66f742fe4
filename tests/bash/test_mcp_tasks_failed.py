"""A tracked task whose end the daemon cannot read: `tasks/get` answers `failed` with a JSON-RPC error that says
what went wrong and how to see the end (status(id)), the operator's log gets the traceback, and the task itself
keeps its end: a later poll, once reading works again, completes the handle with it.

In-process, with the engine's status reading made to raise: no real fault of a healthy daemon reaches that path
(an unreadable output is said inside the status text, not raised), so the fault is injected where it would
surface."""

import logging

import pytest
from daemon_harness import wait_until
from kit.gate import Gate

from hivebash.tools.client_tasks import BashTaskHandles


@pytest.fixture
def handles(engine):
    return BashTaskHandles(engine)


def _tracked_end(engine, handles, tmp_path):
    gate = Gate(tmp_path)
    outcome = engine.run(f"{gate.wait}; echo finished", wait_seconds=0)
    result = handles.hand_out(outcome)
    assert result is not None and result.task is not None
    handle = result.task["taskId"]
    assert handles.get(handle).status == "working"
    gate.open()
    task_id = outcome.view.task.id

    def ended() -> bool:  # read in the registry: status(id) would show the end, and the poll then says one line
        with engine.registry.locked() as tasks:
            return tasks.get(task_id).task.ended

    wait_until(ended, 10, "the task's end")
    return task_id, handle


def test_an_end_the_daemon_cannot_read_is_failed_then_completed_once_it_can(engine, handles, tmp_path,
                                                                           monkeypatch, caplog):
    task_id, handle = _tracked_end(engine, handles, tmp_path)
    real_status = engine.status

    def broken_status(*args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(engine, "status", broken_status)
    with caplog.at_level(logging.ERROR, logger="hivebash.tools.client_tasks"):
        failed = handles.get(handle)
    assert failed.status == "failed"
    assert failed.error["code"] == -32603
    message = failed.error["message"]
    assert f"could not read task {task_id}'s end" in message and "Input/output error" in message
    assert f'status(id="{task_id}") shows it' in message
    assert any(r.exc_info and f"tasks/get of task {task_id} failed" in r.getMessage() for r in caplog.records)

    monkeypatch.setattr(engine, "status", real_status)
    done = handles.get(handle)
    assert done.status == "completed"
    assert "finished" in done.result["content"][0]["text"]
