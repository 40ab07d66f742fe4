"""The real interactive Claude Code (its TUI, in tmux: tests/kit/claude_tui.py) driving our daemons' tools, with
the mock Messages API as its model. The interactive session is the client that declares the MCP tasks extension
and shows progress; `claude -p` (test_claude_drives_daemons.py) does neither.
"""

import json
import re

import psutil
import pytest
from daemon_harness import REPO, wait_until
from kit.claude_tui import backgrounded_call, tool_results
from kit.hivebash_testkit import marked_processes
from kit.mock_messages_api import claude_env
from raw_mcp import modern

pytestmark = pytest.mark.interop
BIN = REPO / ".venv" / "bin"


@pytest.fixture
def bash_daemon(daemon_factory, tmp_path):
    return daemon_factory([str(BIN / "hive-bash-daemon"), "--state-dir", str(tmp_path / "bash-state")])


def bash_daemon_status(daemon, task_id: str) -> str:
    """What status(id) answers a plain client now."""
    resp, body = modern(daemon.url, "tools/call", {"name": "status", "arguments": {"id": task_id}})
    return body["result"]["content"][0]["text"]


def test_the_interactive_session_runs_a_command_and_the_model_reads_its_result(bash_daemon, claude_tui, mock_api):
    tui = claude_tui({"bash": bash_daemon.url})
    seen = len(mock_api.message_requests())
    call = {"cmd": "echo from-the-tui; exit 4", "name": "tui-inline", "wait_seconds": 20}
    tui.type("MOCK:tool=mcp__bash__run " + json.dumps(call))
    results = mock_api.wait_messages(lambda requests: tool_results(requests[seen:]), 60, "the tool result")
    assert results[0].startswith("id=tui-inline status=done exit_code=4"), results
    assert "from-the-tui" in results[0]
    tui.wait_pane("tool said: id=tui-inline status=done exit_code=4", 30, "the model's reply on the screen")


def test_a_subagent_turn_moves_to_the_background_and_its_answer_arrives_as_a_new_turn(daemon_factory, claude_tui,
                                                                                       claude_bin, mock_api, tmp_path):
    """mcp__subagent__start from the interactive session answers a task: the model gets control back at once,
    Claude Code polls tasks/get, and the nested session's answer reaches the model as a <task-notification>."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    subagent = daemon_factory([str(BIN / "hive-subagent-daemon"), "--state-dir", str(tmp_path / "sub-state"),
                               "--claude-bin", claude_bin, "--workdir", str(workdir)],
                              env=claude_env(mock_api.url, tmp_path / "nested"))
    recipe = tmp_path / "recipe.md"
    recipe.write_text("You are a careful helper. Answer in one line.\n")
    tui = claude_tui({"subagent": subagent.url})
    call = {"name": "tui-helper", "prompt_file": str(recipe), "trigger": "MOCK:sleep=2 MOCK:reply=nested answer 42"}
    started, text = backgrounded_call(tui, mock_api, "subagent/start", call)
    assert "name=tui-helper" in started, started
    assert "<status>completed</status>" in text and "nested answer 42" in text, text[-3000:]
    assert "outcome=completed" in text, text[-3000:]


def test_a_command_still_running_after_its_wait_moves_to_the_background_and_its_output_arrives(bash_daemon,
                                                                                             claude_tui, mock_api):
    """mcp__bash__run of a task of a few seconds, from the interactive session: its wait ends first, so the model
    gets a task handle at once with the bash task id; Claude Code polls tasks/get, and when the task ends a new
    turn reaches the model carrying its output."""
    tui = claude_tui({"bash": bash_daemon.url})
    call = {"cmd": "echo first-line; sleep 3; echo task-output-xyz", "name": "tui-bg", "wait_seconds": 1}
    _, text = backgrounded_call(tui, mock_api, "bash/run", call)
    assert "<status>completed</status>" in text and "task-output-xyz" in text, text[-3000:]
    assert "id=tui-bg status=done exit_code=0" in text, text[-3000:]


def test_task_stop_cancels_the_task_and_leaves_no_process_of_it(bash_daemon, claude_tui, mock_api):
    """The model's TaskStop of a running command sends tasks/cancel: the daemon kills the task's whole group."""
    tui = claude_tui({"bash": bash_daemon.url}, allow=["mcp__bash", "TaskStop"])
    seen = len(mock_api.message_requests())
    call = {"cmd": "sleep 120 & sleep 121; wait", "name": "tui-stop", "wait_seconds": 0}
    tui.type("MOCK:tool=mcp__bash__run " + json.dumps(call))
    results = mock_api.wait_messages(lambda requests: tool_results(requests[seen:]), 60, "run's tool result")
    client_id = re.search(r'TaskStop with task_id "([^"]+)"', results[0])
    assert client_id, results
    wait_until(lambda: len(marked_processes("tui-stop")) >= 2, 20, "the task's two sleeps")
    seen = len(mock_api.message_requests())
    tui.type("MOCK:tool=TaskStop " + json.dumps({"task_id": client_id.group(1)}))
    stopped = mock_api.wait_messages(lambda requests: [r for r in tool_results(requests[seen:]) if r not in results],
                                     60, "TaskStop's tool result")
    assert f"Task {client_id.group(1)}" in stopped[0] and "is stopped" in stopped[0], stopped
    wait_until(lambda: not marked_processes("tui-stop"), 20, "no process of the stopped task")
    status = bash_daemon_status(bash_daemon, "tui-stop")
    assert "status=killed" in status, status


def test_task_stop_of_a_subagent_turn_interrupts_it_and_leaves_no_process(daemon_factory, claude_tui, claude_bin,
                                                                         mock_api, tmp_path):
    """TaskStop of a subagent turn sends tasks/cancel: the nested claude is interrupted and no process of it is
    left; the task's end says it was stopped."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    subagent = daemon_factory([str(BIN / "hive-subagent-daemon"), "--state-dir", str(tmp_path / "sub-state"),
                               "--claude-bin", claude_bin, "--workdir", str(workdir), "--kill-grace", "2"],
                              env=claude_env(mock_api.url, tmp_path / "nested"))
    recipe = tmp_path / "recipe.md"
    recipe.write_text("You are a careful helper.\n")
    tui = claude_tui({"subagent": subagent.url}, allow=["mcp__subagent", "TaskStop"])
    seen = len(mock_api.message_requests())
    call = {"name": "tui-long", "prompt_file": str(recipe), "trigger": "MOCK:hold=tui-long-turn"}
    tui.type("MOCK:tool=mcp__subagent__start " + json.dumps(call))
    results = mock_api.wait_messages(lambda requests: tool_results(requests[seen:]), 60, "start's tool result")
    client_id = re.search(r'TaskStop with task_id "([^"]+)"', results[0])
    pid = re.search(r" pid=(\d+)", results[0])
    assert client_id and pid, results
    nested = psutil.Process(int(pid.group(1)))
    wait_until(lambda: mock_api.holding("tui-long-turn"), 30, "the nested turn's model call")
    tree = [nested, *nested.children(recursive=True)]  # (mid-turn: it cannot have ended yet)
    seen = len(mock_api.message_requests())
    tui.type("MOCK:tool=TaskStop " + json.dumps({"task_id": client_id.group(1)}))
    stopped = mock_api.wait_messages(lambda requests: [r for r in tool_results(requests[seen:]) if r not in results],
                                     60, "TaskStop's tool result")
    assert f"Task {client_id.group(1)}" in stopped[0] and "is stopped" in stopped[0], stopped
    _, alive = psutil.wait_procs(tree, timeout=20)
    assert not alive, f"processes of the stopped turn still run: {alive}"
    resp, body = modern(subagent.url, "tools/call", {"name": "status",
                                                     "arguments": {"name": "tui-long", "wait_seconds": 20}})
    text = body["result"]["content"][0]["text"]
    assert "outcome=interrupted" in text and "tasks/cancel" in text, text
