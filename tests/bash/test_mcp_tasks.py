"""The MCP tasks extension against the real bash daemon, by a raw 2026-07-28 client: every wire rule of a task
handle (docs/tools/bash.md, "Tasks of the client"), its cancel, and the handle's survival of a restart."""

import json
import os
import re
import sys
from pathlib import Path

import pytest
from daemon_harness import wait_until
from kit.gate import Gate
from kit.tasks_client import HANDLE, TASKS_META, ended, get, run, task_rpc
from raw_mcp import META, modern

from common.protocol.mcp_tasks import AGENT_TASK_META, TASKS_EXTENSION, UNKNOWN_HANDLE

DAEMON = str(Path(sys.executable).parent / "hive-bash-daemon")


@pytest.fixture
def bash_daemon(daemon_factory, tmp_path):
    def start(*extra, state="state"):
        return daemon_factory([DAEMON, "--state-dir", str(tmp_path / state), "--kill-grace", "0.3", *extra])
    return start


def test_discover_advertises_the_extension_and_off_turns_it_all_off(bash_daemon):
    on = bash_daemon()
    _, body = modern(on.url, "server/discover", {"_meta": TASKS_META})
    assert body["result"]["capabilities"]["extensions"] == {TASKS_EXTENSION: {}}
    assert "background tasks" in body["result"]["instructions"]
    _, body = modern(on.url, "server/discover")
    assert "background tasks" not in body["result"]["instructions"], "the texts follow the request's own declaration"
    _, listing = modern(on.url, "tools/list", {"_meta": TASKS_META})
    run_tool = next(t for t in listing["result"]["tools"] if t["name"] == "run")
    assert "background tasks" in run_tool["description"]

    off = bash_daemon("--mcp-tasks", "off", state="off")
    _, body = modern(off.url, "server/discover", {"_meta": TASKS_META})
    assert "extensions" not in body["result"]["capabilities"]
    result = run(off.url, "sleep 30", wait_seconds=0.2)
    assert result["resultType"] == "complete" and result["content"][0]["text"].startswith("task started: id=")
    _, body = task_rpc(off.url, "tasks/get", "x-" + "0" * 32)
    assert body["error"]["code"] == -32601


def test_a_run_still_running_after_its_wait_answers_a_task_handle_written_to_its_record(bash_daemon, tmp_path):
    d = bash_daemon()
    gate = Gate(tmp_path)
    result = run(d.url, f"echo compiling; echo 'listening on 8080'; {gate.wait}", wait_for="listening", name="srv")
    assert result["resultType"] == "task" and result["status"] == "working"
    handle = result["taskId"]
    assert HANDLE.match(handle)["id"] == "srv" and len(handle) <= 128
    assert type(result["ttlMs"]) is int and result["ttlMs"] > 0 and type(result["pollIntervalMs"]) is int
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", result["createdAt"])
    assert result["statusMessage"].startswith("running ") and "2 lines" in result["statusMessage"]
    assert not {"content", "result", "error", "ttl", "pollInterval", "requestState"} & result.keys()
    said = result["_meta"][AGENT_TASK_META]["modelImmediateResponse"]
    assert "task started: id=srv" in said and "wait_for matched" in said and "compiling" in said
    assert "background task of your client" in said and 'kill(id="srv")' in said
    record = json.loads((tmp_path / "state" / "bash-tasks" / "srv.json").read_text())
    assert record["client_handle"] == handle

    assert get(d.url, handle)["status"] == "working"
    _, listing = modern(d.url, "tools/call", {"name": "list", "arguments": {}, "_meta": META})
    table = listing["result"]["content"][0]["text"]
    assert "running~" in table and "(~: an MCP client tracks it" in table
    gate.open()
    end = ended(d.url, handle)
    assert end["status"] == "completed" and end["resultType"] == "complete" and end["result"]["isError"] is False
    assert "id=srv status=done exit_code=0" in end["result"]["content"][0]["text"]


def test_a_task_that_waits_for_input_says_so_in_its_status_message(bash_daemon):
    d = bash_daemon()
    result = run(d.url, 'read -p "Continue [y/N]? " a; echo "got $a"', stdin="tty", name="ask", wait_seconds=20)
    assert result["resultType"] == "task", result
    says = 'waiting for input: "Continue [y/N]? "; send(id="ask", text="...") types the answer'
    assert result["statusMessage"] == says and says in result["_meta"][AGENT_TASK_META]["modelImmediateResponse"]
    assert get(d.url, result["taskId"])["statusMessage"] == says
    _, body = modern(d.url, "tools/call", {"name": "send", "arguments": {"id": "ask", "text": "y", "wait_seconds": 20},
                                           "_meta": META})
    assert "got y" in body["result"]["content"][0]["text"]
    assert ended(d.url, result["taskId"])["status"] == "completed"


def test_a_client_without_the_extension_and_a_task_that_ends_in_time_answer_as_always(bash_daemon):
    d = bash_daemon()
    plain = run(d.url, "sleep 30", tasks=False, wait_seconds=0.2)
    assert plain["resultType"] == "complete" and "taskId" not in plain
    assert plain["content"][0]["text"].startswith("task started: id=")
    quick = run(d.url, "echo hi", wait_seconds=5)
    assert quick["resultType"] == "complete" and "status=done" in quick["content"][0]["text"]


def test_the_wire_rules_of_tasks_methods(bash_daemon):
    d = bash_daemon()
    handle = run(d.url, "sleep 30", wait_seconds=0)["taskId"]
    resp, body = task_rpc(d.url, "tasks/get", handle, name=None)
    assert resp.status == 400 and body["error"]["code"] == -32020, "Mcp-Name is required"
    resp, body = task_rpc(d.url, "tasks/cancel", handle, name="other")
    assert resp.status == 400 and body["error"]["code"] == -32020
    _, body = task_rpc(d.url, "tasks/get", handle, tasks=False)
    assert body["error"]["code"] == -32021
    assert body["error"]["data"]["requiredCapabilities"]["extensions"] == {TASKS_EXTENSION: {}}
    wrong_secret = handle[:-4] + ("0000" if not handle.endswith("0000") else "1111")
    answers = set()
    for bad in (wrong_secret, "nosuch-" + "0" * 32, "x", HANDLE.match(handle)["id"], "../etc-" + "0" * 32):
        for method in ("tasks/get", "tasks/cancel", "tasks/update"):
            _, body = task_rpc(d.url, method, bad)
            answers.add((body["error"]["code"], body["error"]["message"]))
    assert answers == {(-32602, UNKNOWN_HANDLE)}, "one answer for every unknown handle: no oracle"
    for method in ("tasks/list", "tasks/result"):
        _, body = task_rpc(d.url, method, handle)
        assert body["error"]["code"] == -32601
    _, body = task_rpc(d.url, "tasks/update", handle, inputResponses={"k": {"action": "accept", "content": {}}})
    assert body["result"]["resultType"] == "complete" and "taskId" not in body["result"]
    assert get(d.url, handle)["status"] == "working", "tasks/update changes nothing"


@pytest.mark.parametrize("cmd, says", [("exit 3", "exit_code=3"), ("sleep 0.3; kill -9 $$", "signal=SIGKILL")])
def test_every_end_of_the_command_is_completed_and_the_text_says_which(bash_daemon, cmd, says):
    d = bash_daemon()
    handle = run(d.url, f"sleep 0.5; {cmd}", wait_seconds=0)["taskId"]
    end = ended(d.url, handle)
    assert end["status"] == "completed" and says in end["result"]["content"][0]["text"]


def test_cancel_acks_at_once_twice_and_stops_even_a_task_that_ignores_sigint(bash_daemon, tmp_path):
    d = bash_daemon()
    pid_file = tmp_path / "pid"
    handle = run(d.url, f"trap '' INT; echo $$ > {pid_file}; sleep 60 & wait; sleep 60", wait_seconds=0.3)["taskId"]
    pid = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 10, "the pid"))
    for _ in range(2):  # Claude Code sends two, a millisecond apart
        resp, body = task_rpc(d.url, "tasks/cancel", handle)
        assert resp.status == 200 and body["result"]["resultType"] == "complete" and "taskId" not in body["result"]
    first = get(d.url, handle)
    assert first["status"] == "cancelled"
    end = wait_until(lambda: (r := get(d.url, handle))["statusMessage"].startswith("cancelled:") and r, 10, "the end")
    assert "status=killed" in end["statusMessage"] and "signal=SIGKILL" in end["statusMessage"]
    assert not os.path.exists(f"/proc/{pid}"), "the group got SIGKILL after the grace"
    _, body = task_rpc(d.url, "tasks/cancel", handle)
    assert body["result"]["resultType"] == "complete", "a cancel of an ended task is acked as well"


def test_an_end_already_shown_completes_the_handle_with_one_line(bash_daemon):
    d = bash_daemon()
    handle = run(d.url, "sleep 0.5; echo out", wait_seconds=0)["taskId"]
    task_id = HANDLE.match(handle)["id"]
    _, body = modern(d.url, "tools/call", {"name": "status", "arguments": {"id": task_id, "wait_seconds": 10},
                                           "_meta": TASKS_META})
    assert "status=done" in body["result"]["content"][0]["text"]
    end = ended(d.url, handle)
    text = end["result"]["content"][0]["text"]
    assert end["status"] == "completed" and "shown its end already" in text and "\n" not in text


def test_a_handle_resolves_after_a_restart_and_says_interrupted(bash_daemon):
    d = bash_daemon()
    handle = run(d.url, "sleep 60", wait_seconds=0)["taskId"]
    d.stop()
    again = bash_daemon()
    end = get(again.url, handle)
    assert end["status"] == "completed" and "status=interrupted" in end["result"]["content"][0]["text"]


def test_a_queued_task_is_a_task_too_and_its_cancel_ends_it_before_it_starts(bash_daemon, tmp_path):
    d = bash_daemon("--max-running", "1")
    gate = Gate(tmp_path)
    run(d.url, gate.wait, tasks=False, wait_seconds=0)
    queued = run(d.url, "echo never", wait_seconds=0.2)
    assert queued["resultType"] == "task" and queued["statusMessage"].startswith("pending")
    assert "task queued: id=" in queued["_meta"][AGENT_TASK_META]["modelImmediateResponse"]
    _, body = task_rpc(d.url, "tasks/cancel", queued["taskId"])
    assert body["result"]["resultType"] == "complete"
    end = get(d.url, queued["taskId"])
    assert end["status"] == "cancelled" and "cancelled by the client before it started" in end["statusMessage"]
    gate.open()
