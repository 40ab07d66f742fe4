"""Fault injection against the real bash daemon (a subprocess on port 0) and the real todo sink.

Each test breaks one thing the daemon depends on — its own life (kill -9), the harness socket, the disk, a
client's connection, a task that will not die — and checks what the agent would see afterwards: every task
accounted for, outputs intact, each todo delivered once, no process left behind.
"""

import json
import shutil
import socket
import subprocess

import psutil
import pytest
from daemon_harness import wait_until
from kit.daemons_kit import BASH_DAEMON, task_processes
from kit.gate import Gate
from kit.robust_kit import META, build_request, host_of, result_text

from common.todos.outbox import JOURNAL_NAME, read_journal


def _marker(daemon, task_id: str) -> str:
    return json.loads((daemon.state_dir / "bash-tasks" / f"{task_id}.json").read_text())["marker"]


@pytest.mark.slow
def test_kill_9_with_running_and_pending_tasks_then_restart(bash_factory, sink_factory):
    """kill -9 with 20 running and 20 pending: after a restart all 40 are `interrupted`, the running ones'
    output is intact, their processes are gone, and each task's interrupted todo reaches the harness once."""
    sink = sink_factory()
    daemon = bash_factory("--max-running", "20")
    ids = [f"t{i:02d}" for i in range(40)]
    for task_id in ids:
        daemon.call("run", cmd=f"echo out-{task_id}; echo err-{task_id} >&2; exec sleep 300",
                    name=task_id, wait_seconds=0)
    wait_until(lambda: len(daemon.tasks("running")) == 20, 60, "20 tasks running")
    running = [t["id"] for t in daemon.tasks("running")]
    pending = [t["id"] for t in daemon.tasks("pending")]
    assert len(pending) == 20 and set(running) | set(pending) == set(ids)
    out_dir = daemon.state_dir / "bash-tasks"
    wait_until(lambda: all((out_dir / f"{i}.out").read_bytes() == f"out-{i}\n".encode() for i in running), 30,
               "the running tasks' first output")
    markers = {_marker(daemon, i) for i in ids}
    pids = [psutil.Process(daemon.call("status", id=i)["pid"]) for i in running]

    daemon.kill9()
    assert all(p.is_running() for p in pids), "kill -9 of the daemon leaves its tasks running (until the restart)"
    daemon.start()

    tasks = {t["id"]: t for t in daemon.tasks()}
    assert set(tasks) == set(ids), "every task is still known"
    assert {t["status"] for t in tasks.values()} == {"interrupted"}

    # Each interrupted todo reaches the harness exactly once and is what the harness shows now. (Before any
    # status call: a status that shows the agent the result rightly clears the todo.)
    def interrupted_upserts(key):
        return [e for e in sink.upserts(key) if "status=interrupted" in e["summary"]]

    wait_until(lambda: all(interrupted_upserts(i) for i in ids), 30, "an interrupted todo for every task")
    todos = sink.todos()
    for task_id in ids:
        assert len(interrupted_upserts(task_id)) == 1, sink.upserts(task_id)
        assert "status=interrupted" in todos[task_id]["summary"]

    for task_id in running:
        status = daemon.call("status", id=task_id)
        assert status["stdout"]["tail"] == f"out-{task_id}\n" and status["stderr"]["tail"] == f"err-{task_id}\n"
        assert "running" in status["note"]
    for task_id in pending:
        status = daemon.call("status", id=task_id)
        assert status["stdout"]["size"] == 0 and "pending" in status["note"]
    wait_until(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in pids), 30,
               "the interrupted tasks' processes to be stopped")
    assert not task_processes(markers)
    wait_until(lambda: not sink.todos(), 30, "the status calls to clear the todos they answered")
    # The restarted daemon still works.
    assert daemon.call("run", cmd="echo fine", wait_seconds=20)["status"] == "done"


@pytest.mark.slow
def test_kill_9_right_after_the_answers_with_batched_flushes(bash_factory):
    """With records flushed to disk in the background (the default), a kill -9 the moment the answers are in
    loses nothing: after a restart every task is known with the result it was answered with, and its output."""
    daemon = bash_factory("--fsync", "batched", "--fsync-window", "5", socket=False)  # no flush before the kill
    answers = {f"b{i:02d}": daemon.call("run", cmd=f"echo out-{i}; exit {i % 3}", name=f"b{i:02d}", wait_seconds=30)
               for i in range(20)}
    daemon.call("run", cmd="exec sleep 300", name="long", wait_seconds=0)
    assert {a["status"] for a in answers.values()} == {"done"}
    daemon.kill9()
    daemon.start()
    tasks = {t["id"]: t for t in daemon.tasks()}
    assert set(tasks) == set(answers) | {"long"}
    assert tasks["long"]["status"] == "interrupted"
    for task_id, answer in answers.items():
        status = daemon.call("status", id=task_id)
        assert (status["status"], status["exit_code"]) == ("done", answer["exit_code"])
        assert status["stdout"]["tail"] == answer["stdout"]["tail"] == f"out-{int(task_id[1:])}\n"


@pytest.mark.slow
def test_harness_socket_gone_and_back_mid_run(bash_factory, sink_factory):
    """The sink dies while tasks run: tool calls keep working, completions wait in the outbox, and when a
    sink listens on the socket again they reach it (each once), newest state per task."""
    sink = sink_factory()
    daemon = bash_factory()
    gate = Gate(daemon.state_dir.parent)  # the first task runs until the harness has gone
    first = daemon.call("run", cmd=f"{gate.wait}; echo a", name="before", wait_seconds=0)
    wait_until(lambda: sink.upserts("before"), 20, "the running todo of the first task")
    sink.stop()
    assert not sink.socket_path.exists()
    gate.open()

    during = [daemon.call("run", cmd=f"echo {i}", name=f"during-{i}", wait_seconds=0)["id"] for i in range(5)]
    wait_until(lambda: all(t["status"] == "done" for t in daemon.tasks() if t["id"] in during + [first["id"]]), 30,
               "the tasks to finish while the harness is away")
    assert daemon.call("status", id="during-0")["stdout"]["tail"] == "0\n", "status works without a harness"
    journal = daemon.state_dir / "todos" / "bash" / JOURNAL_NAME
    assert read_journal(journal), "undelivered todos wait in the outbox"

    sink2 = sink_factory()  # the same socket path
    daemon.call("run", cmd="true", name="wake", wait_seconds=0)  # any new todo wakes the delivery at once
    unseen = during[1:] + ["before"]  # during-0's result was shown by status: it must not come as a todo

    def delivered():
        todos = sink2.todos()
        return set(unseen) <= set(todos) and all("status=done" in todos[k]["summary"] for k in unseen)

    wait_until(delivered, 30, "the completions to reach the new sink", interval=0.2)
    assert "during-0" not in sink2.todos() and not sink2.upserts("during-0")
    for key in unseen:
        done = [e for e in sink2.upserts(key) if "status=done" in e["summary"]]
        assert len(done) == 1, sink2.upserts(key)
    wait_until(lambda: not read_journal(journal), 30, "the outbox to drain")


@pytest.mark.slow
def test_output_flood_does_not_disturb_other_tasks(bash_factory):
    """One task writes as fast as it can; meanwhile other tasks run and finish with their exact output, and
    status of the flooding task returns only its tail (bounded by --tail-bytes) with the true size."""
    daemon = bash_factory("--tail-bytes", "4096")
    daemon.call("run", cmd="yes flood-line-of-output | head -c 400000000", name="flood", wait_seconds=0)
    wait_until(lambda: daemon.call("status", id="flood")["stdout"]["size"] > 20_000_000, 60,
               "the flood to be under way")
    for i in range(10):
        status = daemon.call("run", cmd=f"printf 'quiet-{i}'", wait_seconds=20)
        assert status["status"] == "done" and status["stdout"]["tail"] == f"quiet-{i}"
        flood = daemon.call("status", id="flood")
        assert flood["stdout"]["shown_bytes"] <= 4096 and "flood-line-of-output" in flood["stdout"]["tail"]
        assert flood["stdout"]["size"] >= flood["stdout"]["shown_bytes"]
    daemon.call("kill", id="flood", force=True)
    final = daemon.call("status", id="flood", wait_seconds=20)
    assert final["status"] in ("killed", "done")
    assert final["stdout"]["size"] == (daemon.state_dir / "bash-tasks" / "flood.out").stat().st_size
    (daemon.state_dir / "bash-tasks" / "flood.out").unlink()  # 400 MB at most: free the disk now


@pytest.mark.slow
def test_client_disconnecting_during_inline_wait(bash_factory, sink_factory):
    """The client sends run with a long inline wait and hangs up. The task runs on, and since nobody received
    its result, its completion must come as a todo."""
    sink = sink_factory()
    daemon = bash_factory()
    gate = Gate(daemon.state_dir.parent)  # the task ends only once the daemon has seen the hang-up
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "run", "arguments": {"cmd": f"{gate.wait}; echo finished", "name": "hangup", "wait_seconds": 30},
        "_meta": META}})
    raw = build_request("POST", "/mcp", "HTTP/1.1", [
        ("Host", host_of(daemon.url)), ("Content-Type", "application/json"), ("Accept", "application/json"),
        ("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", "run")], body.encode())
    host, port = host_of(daemon.url).rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(raw)
        wait_until(lambda: any(t["id"] == "hangup" for t in daemon.tasks()), 20, "the task to be submitted")
    # the connection is closed while the daemon waits inline: the wait ends, and `run`'s "running" todo says so
    wait_until(lambda: sink.upserts("hangup"), 20, "the running todo of the task whose client hung up")
    gate.open()
    wait_until(lambda: daemon.tasks()[0]["status"] == "done", 30, "the task to finish")
    # No status call here: a status that sees the result would rightly clear the todo.
    wait_until(lambda: any("status=done" in e["summary"] for e in sink.upserts("hangup")), 10,
               "the completion todo of the task whose client hung up")
    assert (daemon.state_dir / "bash-tasks" / "hangup.out").read_text() == "finished\n"


@pytest.mark.slow
def test_force_kill_ends_a_task_that_ignores_sigint_and_sigterm(bash_factory):
    """A child that traps INT and TERM (and a grandchild that leaves the group with setsid): kill() asks,
    kill(force=true) ends everything, and no process of the task survives."""
    daemon = bash_factory("--kill-grace", "1")
    cmd = ("trap '' INT TERM; setsid bash -c \"trap '' INT TERM; echo escaped; exec sleep 300\" & "
           "echo stubborn; while :; do sleep 0.1; done")
    daemon.call("run", cmd=cmd, name="stubborn", wait_seconds=0)
    marker = _marker(daemon, "stubborn")
    wait_until(lambda: len(task_processes({marker})) >= 2, 20, "the stubborn task and its escapee")
    wait_until(lambda: "escaped" in (daemon.state_dir / "bash-tasks" / "stubborn.out").read_text(), 20,
               "the escapee to start")
    daemon.call("kill", id="stubborn")
    assert daemon.call("status", id="stubborn", wait_seconds=1.5)["status"] == "running", "SIGINT is ignored"
    kill = daemon.call("kill", id="stubborn", force=True)
    assert kill["action"] == "signalled"
    final = daemon.call("status", id="stubborn", wait_seconds=20)
    assert final["status"] == "killed"
    wait_until(lambda: not task_processes({marker}), 20, "every process of the task to be gone")


@pytest.mark.slow
def test_unwritable_state_directory_is_a_clear_error(tmp_path):
    """A state directory that cannot be created (its parent is a regular file: even root cannot) stops the
    daemon at start with one clear line naming the path, not a traceback."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    proc = subprocess.run([str(BASH_DAEMON), "--state-dir", str(blocker / "state"), "--port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    assert str(blocker / "state") in proc.stderr or "state" in proc.stderr.lower(), proc.stderr


@pytest.mark.slow
def test_state_directory_lost_while_serving(bash_factory, tmp_path):
    """The state directory becomes unusable under a running daemon (replaced by a file): run is refused with
    a clear error naming the problem, other tools keep answering, and the daemon does not crash."""
    daemon = bash_factory(socket=False)
    assert daemon.call("run", cmd="echo before", name="before", wait_seconds=20)["status"] == "done"
    tasks_dir = daemon.state_dir / "bash-tasks"
    moved = tmp_path / "moved-away"
    shutil.move(str(tasks_dir), moved)
    tasks_dir.write_text("now a file")
    try:
        result = daemon.call_result("run", {"cmd": "echo after", "wait_seconds": 5})
        assert result["isError"], result
        text = result_text(result)
        assert "cmd:" in text or "bash-tasks" in text, text
        assert "Traceback" not in text
        assert daemon.call("list")["total"] >= 1
        assert daemon.alive()
    finally:
        tasks_dir.unlink()
        shutil.move(str(moved), tasks_dir)
    assert daemon.call("run", cmd="echo again", wait_seconds=20)["status"] == "done", "recovers once the disk is back"
