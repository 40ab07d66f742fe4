"""The subagent daemon's side of the MCP tasks extension, with a raw 2026-07-28 client and a real daemon
process (the fake claude, steered by its prompt, so a turn ends when the test opens its gate):
start/continue answer a task handle once the turn runs (only to a request that declared the extension),
tasks/get follows it to its end (the status answer), tasks/cancel interrupts it, the handle survives a restart,
and a poll that returns the end is the one notice (no todo then).
"""

import json
import re

import psutil
import pytest
from daemon_harness import REPO, sink_todos, wait_until
from kit.gate import Gate
from raw_mcp import META, modern

from common.protocol.mcp_tasks import TASKS_EXTENSION

BIN = REPO / ".venv" / "bin"
TASKS_META = dict(META, **{"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})


@pytest.fixture
def start_daemon(daemon_factory, fake_claude_bin, fake_env, tmp_path, sink):
    workdir = tmp_path / "work"
    workdir.mkdir()

    def start(*extra):
        return daemon_factory([str(BIN / "hive-subagent-daemon"), "--claude-bin", fake_claude_bin, "--workdir",
                               str(workdir), "--state-dir", str(tmp_path / "state"), "--agent-socket", str(sink),
                               "--kill-grace", "2", *extra], env=fake_env)
    return start


def call(url, name, arguments, meta=TASKS_META):
    resp, body = modern(url, "tools/call", {"name": name, "arguments": arguments, "_meta": meta})
    assert resp.status == 200, body
    return body["result"]


def task_call(url, method, handle, meta=TASKS_META):
    resp, body = modern(url, method, {"taskId": handle, "_meta": meta}, headers={"Mcp-Name": handle})
    return resp.status, body


def get(url, handle):
    status, body = task_call(url, "tasks/get", handle)
    assert status == 200 and "result" in body, body
    return body["result"]


def completed_start(url, prompt_file, tmp_path, name, reply):
    """A `start` answered as a task (its turn held at a gate until the answer came), followed to the turn's end
    that says `reply`: the task's handle."""
    gate = Gate(tmp_path)
    handle = call(url, "start", {"name": name, "prompt_file": str(prompt_file),
                                 "trigger": f"FAKE:gate={gate.path}\nFAKE:reply={reply}"})["taskId"]
    gate.open()
    wait_until(lambda: get(url, handle)["status"] == "completed", 30, f"the end of {name}'s first turn")
    return handle


def test_start_answers_a_task_that_a_poll_follows_to_the_turns_end(start_daemon, prompt_file, tmp_path, sink):
    daemon = start_daemon()
    gate = Gate(tmp_path)
    result = call(daemon.url, "start", {"name": "tasked", "prompt_file": str(prompt_file),
                                        "trigger": f"FAKE:gate={gate.path}\nFAKE:reply=the end answer 7"})
    assert result["resultType"] == "task" and result["status"] == "working", result
    handle = result["taskId"]
    assert handle.startswith("tasked-") and len(handle.rsplit("-", 1)[1]) == 32, handle
    immediate = result["_meta"]["com.anthropic/agent-task"]["modelImmediateResponse"]
    assert "name=tasked" in immediate and "task notification" in immediate, immediate
    assert result["pollIntervalMs"] == 1000 and isinstance(result["ttlMs"], int)
    assert json.loads((tmp_path / "state" / "task-handles.json").read_text())["handles"]["tasked"]["handle"] == handle

    working = get(daemon.url, handle)
    assert working["status"] == "working" and working["statusMessage"].startswith("running"), working
    gate.open()
    done = wait_until(lambda: (r := get(daemon.url, handle))["status"] == "completed" and r, 30, "the end")
    text = done["result"]["content"][0]["text"]
    assert "outcome=completed" in text and "the end answer 7" in text, text
    assert done["result"]["isError"] is False
    # The poll delivered the end: no todo for it (one notice, never two).
    wait_until(lambda: not [t for t in sink_todos(sink) if t["key"] == "tasked"], 10, "no todo for the end")


def test_a_client_without_the_extension_gets_the_plain_answer_and_no_tasks(start_daemon, prompt_file, tmp_path):
    daemon = start_daemon()
    gate = Gate(tmp_path)
    result = call(daemon.url, "start", {"name": "plain", "prompt_file": str(prompt_file),
                                        "trigger": f"FAKE:gate={gate.path}"}, meta=META)
    assert "resultType" not in result or result["resultType"] == "complete", result
    assert result["content"][0]["text"].startswith("state=running name=plain"), result
    status, body = task_call(daemon.url, "tasks/get", "plain-" + "0" * 32, meta=META)
    assert body["error"]["code"] == -32021, body
    gate.open()


def test_discover_and_listing_say_the_task_path_to_a_client_of_the_extension(start_daemon):
    daemon = start_daemon()
    resp, body = modern(daemon.url, "server/discover", {"_meta": TASKS_META})
    assert body["result"]["capabilities"]["extensions"] == {TASKS_EXTENSION: {}}, body
    assert "task notification" in body["result"]["instructions"]
    resp, body = modern(daemon.url, "tools/list", {"_meta": TASKS_META})
    start = next(t for t in body["result"]["tools"] if t["name"] == "start")
    assert "background tasks" in start["description"] and "todo" not in start["description"], start["description"]
    resp, body = modern(daemon.url, "tools/list", {"_meta": META})
    start = next(t for t in body["result"]["tools"] if t["name"] == "start")
    assert "background tasks" not in start["description"], start["description"]


def test_a_wrong_secret_and_an_unknown_name_get_one_answer(start_daemon, prompt_file, tmp_path):
    daemon = start_daemon()
    gate = Gate(tmp_path)
    handle = call(daemon.url, "start", {"name": "secret", "prompt_file": str(prompt_file),
                                        "trigger": f"FAKE:gate={gate.path}"})["taskId"]
    wrong = handle[:-1] + ("0" if handle[-1] != "0" else "1")
    answers = [task_call(daemon.url, "tasks/get", h)[1]["error"] for h in (wrong, "nobody-" + "a" * 32)]
    assert answers[0] == answers[1] and answers[0]["code"] == -32602, answers
    gate.open()


def test_cancel_interrupts_the_turn_and_leaves_no_process(start_daemon, prompt_file, tmp_path, sink):
    daemon = start_daemon()
    result = call(daemon.url, "start", {"name": "stopme", "prompt_file": str(prompt_file),
                                        "trigger": "FAKE:sleep=60"})
    handle = result["taskId"]
    immediate = result["_meta"]["com.anthropic/agent-task"]["modelImmediateResponse"]
    pid = int(re.search(r" pid=(\d+)", immediate).group(1))
    for _ in range(2):  # Claude Code sends two cancels a millisecond apart
        status, body = task_call(daemon.url, "tasks/cancel", handle)
        assert status == 200 and body["result"]["resultType"] == "complete", body
    done = wait_until(lambda: (r := get(daemon.url, handle))["status"] != "working" and r, 30, "the cancel's end")
    assert done["status"] == "cancelled" and "tasks/cancel" in done["statusMessage"], done
    assert "outcome=interrupted" in done["statusMessage"], done
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    wait_until(lambda: call(daemon.url, "status", {"name": "stopme"}, meta=META)["content"][0]["text"]
               .startswith("name=stopme state=finished"), 10, "the end recorded")
    assert not [t for t in sink_todos(sink) if t["key"] == "stopme"], "the client stopped it: no todo"


def test_a_handle_resolves_after_a_restart(start_daemon, prompt_file, tmp_path):
    daemon = start_daemon()
    handle = completed_start(daemon.url, prompt_file, tmp_path, "survivor", "before the restart")
    daemon.stop()
    again = start_daemon()
    done = get(again.url, handle)
    assert done["status"] == "completed" and "before the restart" in done["result"]["content"][0]["text"], done


def test_status_marks_a_turn_a_client_follows_as_a_task(start_daemon, prompt_file, tmp_path):
    daemon = start_daemon()
    gate = Gate(tmp_path)
    call(daemon.url, "start", {"name": "followed", "prompt_file": str(prompt_file),
                               "trigger": f"FAKE:gate={gate.path}"})
    call(daemon.url, "start", {"name": "unfollowed", "prompt_file": str(prompt_file),
                               "trigger": f"FAKE:gate={gate.path}"}, meta=META)
    listing = call(daemon.url, "status", {}, meta=META)["content"][0]["text"]
    lines = {line.split()[0]: line for line in listing.splitlines()[1:]}
    assert "client_task=true" in lines["name=followed"] and "client_task" not in lines["name=unfollowed"], listing
    one = call(daemon.url, "status", {"name": "followed"}, meta=META)["content"][0]["text"]
    assert "client_task=true" in one.splitlines()[0], one
    gate.open()


def test_an_end_the_model_was_shown_completes_the_task_in_one_line(start_daemon, prompt_file, tmp_path, sink):
    """A status that showed the end already: the poll completes the handle with one line that says so (the client
    turns every completion into a model turn), and no todo is sent."""
    daemon = start_daemon()
    gate = Gate(tmp_path)
    handle = call(daemon.url, "start", {"name": "seen", "prompt_file": str(prompt_file),
                                        "trigger": f"FAKE:gate={gate.path}\nFAKE:reply=long answer text"})["taskId"]
    gate.open()
    shown = call(daemon.url, "status", {"name": "seen", "wait_seconds": 20})["content"][0]["text"]
    assert "outcome=completed" in shown and "long answer text" in shown, shown
    done = get(daemon.url, handle)
    text = done["result"]["content"][0]["text"]
    assert done["status"] == "completed" and "shown this end already" in text, done
    assert len(text.splitlines()) == 1 and "long answer text" not in text, text
    wait_until(lambda: not [t for t in sink_todos(sink) if t["key"] == "seen"], 10, "no todo for the end")


def test_update_is_acked_for_a_known_handle_and_mcp_tasks_off_answers_as_before(start_daemon, prompt_file, tmp_path,
                                                                                 sink):
    daemon = start_daemon()
    gate = Gate(tmp_path)
    handle = call(daemon.url, "start", {"name": "upd", "prompt_file": str(prompt_file),
                                        "trigger": f"FAKE:gate={gate.path}"})["taskId"]
    status, body = task_call(daemon.url, "tasks/update", handle)
    assert status == 200 and body["result"]["resultType"] == "complete", body
    status, body = task_call(daemon.url, "tasks/update", "upd-" + "f" * 32)
    assert body["error"]["code"] == -32602, body
    gate.open()
    wait_until(lambda: get(daemon.url, handle)["status"] == "completed", 30, "the end")
    daemon.stop()

    off = start_daemon("--mcp-tasks", "off")
    second = Gate(tmp_path)
    result = call(off.url, "start", {"name": "offline", "prompt_file": str(prompt_file),
                                     "trigger": f"FAKE:gate={second.path}"})
    assert result.get("resultType", "complete") == "complete" and "taskId" not in result, result
    assert result["content"][0]["text"].startswith("state=running name=offline"), result
    resp, body = modern(off.url, "server/discover", {"_meta": TASKS_META})
    assert TASKS_EXTENSION not in body["result"]["capabilities"].get("extensions", {}), body
    second.open()


def test_a_client_that_stopped_polling_still_gets_the_todo(start_daemon, prompt_file, tmp_path, sink):
    """Never none: the end's todo waits for a client that polled lately, then goes to the harness socket when no
    poll comes (a closed Claude Code)."""
    daemon = start_daemon()
    gate = Gate(tmp_path)
    handle = call(daemon.url, "start", {"name": "gone", "prompt_file": str(prompt_file),
                                        "trigger": f"FAKE:gate={gate.path}\nFAKE:reply=nobody polls me"})["taskId"]
    assert get(daemon.url, handle)["status"] == "working"  # it polled once, then went away
    gate.open()
    todo = wait_until(lambda: next((t for t in sink_todos(sink, strict=False) if t["key"] == "gone"), None), 20,
                      "the todo of the end")
    assert "completed" in todo["summary"], todo


def test_a_turn_stopped_by_a_restart_completes_its_handle_saying_so(start_daemon, prompt_file, tmp_path):
    daemon = start_daemon()
    gate = Gate(tmp_path)
    handle = call(daemon.url, "start", {"name": "cut", "prompt_file": str(prompt_file),
                                        "trigger": f"FAKE:gate={gate.path}"})["taskId"]
    daemon.stop()  # the shutdown stops the running turn
    again = start_daemon()
    done = get(again.url, handle)
    text = done["result"]["content"][0]["text"]
    assert done["status"] == "completed" and text.startswith("name=cut state=finished"), done
    assert "interrupted" in text, text


def test_continue_answers_a_new_task_that_replaces_the_last_turns(start_daemon, prompt_file, tmp_path):
    daemon = start_daemon()
    first = completed_start(daemon.url, prompt_file, tmp_path, "again", "turn one")
    later = Gate(tmp_path)
    result = call(daemon.url, "continue", {"name": "again", "prompt": f"FAKE:gate={later.path}\nFAKE:reply=turn two"})
    assert result["resultType"] == "task" and result["taskId"] != first and result["taskId"].startswith("again-")
    assert "turn=2" in result["_meta"]["com.anthropic/agent-task"]["modelImmediateResponse"], result
    assert task_call(daemon.url, "tasks/get", first)[1]["error"]["code"] == -32602  # one handle per session
    later.open()
    done = wait_until(lambda: (r := get(daemon.url, result["taskId"]))["status"] == "completed" and r, 30, "the end")
    assert "turn two" in done["result"]["content"][0]["text"], done
