"""A worker that fails once its task's process runs must not lose the task: the processes are stopped, the
leader reaped, and the end recorded as `killed` with the reason (never "failed to start": it did start)."""

import json

from kit.hivebash_testkit import marked_processes, wait_until

from hivebash.processes.lifecycle import Lifecycle
from hivebash.processes.runner import TaskRunner


def test_a_worker_that_fails_after_the_spawn_stops_the_task_and_says_why(engine, monkeypatch):
    """An injected fault: no real input makes the worker fail after its spawn any more (the one that did, a
    timeout_secs beyond poll()'s range, is driven for real in tests/robustness/test_hostile_local.py), so
    the supervision loop is made to raise to prove the net under whatever fails there next."""

    def broken_wait(self, *args):
        raise RuntimeError("injected fault")

    monkeypatch.setattr(TaskRunner, "_wait_leader", broken_wait)
    out = engine.run("sleep 300 & sleep 300; echo never", wait_seconds=20)
    task = out.view.task
    assert task.state == "killed", task
    assert "worker failed (RuntimeError: injected fault)" in task.result.note
    assert "failed to start" not in task.result.note and task.result.signal == "SIGKILL"
    assert wait_until(lambda: not marked_processes(task.marker), 10), "the task's processes live on"
    record = json.loads((engine.store.dir / f"{task.id}.json").read_text())
    assert record["state"] == "killed" and "injected fault" in record["result"]["note"]
    assert engine.kill(task.id, force=True).action == "nothing"


def test_a_worker_that_fails_when_told_of_the_spawn_still_stops_the_task(engine, monkeypatch):
    """Injected too: the engine's own step right after the spawn raising (the task is still pending then)."""
    hooks = Lifecycle  # what each task's runner reports to
    pids = []

    def failing_on_spawned(self, task, pid, started):
        pids.append(pid)
        raise RuntimeError("injected fault in on_spawned")

    monkeypatch.setattr(hooks, "on_spawned", failing_on_spawned)
    out = engine.run("sleep 300", wait_seconds=20)
    task = out.view.task
    assert task.state == "killed" and "injected fault in on_spawned" in task.result.note, task
    assert pids and wait_until(lambda: not marked_processes(task.marker), 10)
