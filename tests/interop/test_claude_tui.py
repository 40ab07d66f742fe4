"""The real interactive Claude Code (its TUI, in tmux: tests/kit/claude_tui.py) driving our daemons' tools, with
the mock Messages API as its model. The interactive session is the client that declares the MCP tasks extension
and shows progress; `claude -p` (test_claude_drives_daemons.py) does neither.
"""

import json

import pytest
from daemon_harness import REPO
from kit.claude_tui import tool_results

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
