"""One notice, never two, never none, counted call by call: the todo calls an in-process engine makes for a task a
client of the MCP tasks extension tracks (the same daemon over HTTP and the reference sink:
tests/bash/test_mcp_tasks_todos.py)."""

from daemon_harness import wait_until
from kit.gate import Gate

from common.protocol.tools import CallContext
from hivebash.tools import build_registry

TRACKING = CallContext(client_tasks=True)


def _tracked(registry, cmd):
    handle = registry.call("run", {"cmd": cmd, "wait_seconds": 0}, TRACKING).task["taskId"]
    return handle, handle.rsplit("-", 1)[0]


def _completed(registry, handle):
    return wait_until(lambda: (s := registry.task_handles.get(handle)).status == "completed" and s, 10, "the end")


def test_the_end_a_poll_delivers_makes_no_todo_call_at_all(engine, todos, tmp_path):
    registry, gate = build_registry(engine), Gate(tmp_path)
    handle, task_id = _tracked(registry, gate.wait)
    assert registry.task_handles.get(handle).status == "working"
    gate.open()
    _completed(registry, handle)
    engine.todo_calls.run_held()  # what a held todo would do at the latest (the daemon's stop sends them)
    assert todos.for_key(task_id) == [], "no running todo, no completion, no clear"


def test_a_client_that_never_polled_gets_the_completion_and_its_late_poll_clears_it(engine, todos, tmp_path):
    registry, gate = build_registry(engine), Gate(tmp_path)
    handle, task_id = _tracked(registry, gate.wait)
    gate.open()
    wait_until(lambda: todos.upserts(task_id), 10, "the completion todo")
    _completed(registry, handle)
    assert [c[0] for c in todos.for_key(task_id)] == ["upsert", "clear"]
    assert "status=done" in todos.upserts(task_id)[0]["summary"]


def test_after_a_crash_the_clients_poll_delivers_the_interrupted_end(make_engine, todos):
    first = make_engine()
    handle, task_id = _tracked(build_registry(first), "sleep 60")
    record = first.state_dir / "bash-tasks" / f"{task_id}.json"
    crashed = record.read_text()  # what a daemon killed now leaves: the record `run` wrote with the handle
    first.shutdown(timeout=5)
    record.write_text(crashed)
    seen = len(todos.calls)
    second = make_engine()
    registry = build_registry(second)
    end = _completed(registry, handle)
    assert "status=interrupted" in end.result["content"][0]["text"]
    second.todo_calls.run_held()
    assert [c for c in todos.calls[seen:] if c[1] == task_id] == [], "held for the poll, then not needed"
