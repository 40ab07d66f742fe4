"""The real interactive Claude Code (its TUI, in tmux: tests/kit/claude_tui.py) driving our daemons' tools, with
the mock Messages API as its model. The interactive session is the client that declares the MCP tasks extension
and shows progress; `claude -p` (test_claude_drives_daemons.py) does neither.
"""

import json

import pytest
from daemon_harness import REPO
from kit.claude_tui import tool_results
from kit.mock_messages_api import claude_env

pytestmark = pytest.mark.interop
BIN = REPO / ".venv" / "bin"


@pytest.fixture
def bash_daemon(daemon_factory, tmp_path):
    return daemon_factory([str(BIN / "hive-bash-daemon"), "--state-dir", str(tmp_path / "bash-state")])


def test_the_interactive_session_runs_a_command_and_the_model_reads_its_result(bash_daemon, claude_tui, mock_api):
    tui = claude_tui({"bash": bash_daemon.url})
    seen = len(mock_api.message_requests())
    call = {"cmd": "echo from-the-tui; exit 4", "name": "tui-inline", "wait_seconds": 20}
    tui.type("MOCK:tool=mcp__bash__run " + json.dumps(call))
    results = mock_api.wait_messages(lambda requests: tool_results(requests[seen:]), 60, "the tool result")
    assert results[0].startswith("id=tui-inline status=done exit_code=4"), results
    assert "from-the-tui" in results[0]
    tui.wait_pane("tool said: id=tui-inline status=done exit_code=4", 30, "the model's reply on the screen")


def _notified(requests):
    """The first request carrying a <task-notification> (a turn Claude Code starts when a task ends), or None."""
    return next((r for r in requests if "<task-notification>" in json.dumps(r.body.get("messages"))), None)


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
    seen = len(mock_api.message_requests())
    call = {"name": "tui-helper", "prompt_file": str(recipe), "trigger": "MOCK:sleep=2 MOCK:reply=nested answer 42"}
    tui.type("MOCK:tool=mcp__subagent__start " + json.dumps(call))
    results = mock_api.wait_messages(lambda requests: tool_results(requests[seen:]), 60, "start's tool result")
    assert 'MCP tool "subagent/start" started server-side task tui-helper-' in results[0], results
    assert "in the background" in results[0] and "name=tui-helper" in results[0], results
    notice = mock_api.wait_messages(lambda requests: _notified(requests[seen:]), 60, "the task notification")
    text = json.dumps(notice.body["messages"])
    assert "<status>completed</status>" in text and "nested answer 42" in text, text[-3000:]
    assert "outcome=completed" in text, text[-3000:]
