"""hivesubagent.turns.claude without processes: command lines, stream-json reading, the outcome table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hivesubagent.turns import claude
from hivesubagent.turns.claude import StreamState, classify


def test_start_and_continue_command_lines():
    argv = claude.start_argv("claude", "job", "uuid-1", "/dev/fd/5", None)
    assert argv == ["claude", "-p", "--name", "job", "--session-id", "uuid-1",
                    "--append-system-prompt-file", "/dev/fd/5",
                    "--dangerously-skip-permissions", "--strict-mcp-config", "--output-format",
                    "stream-json", "--verbose"]
    argv = claude.continue_argv("/bin/claude", "uuid-1", "opus")
    assert argv[:6] == ["/bin/claude", "-p", "--resume", "uuid-1", "--model", "opus"]
    assert "--dangerously-skip-permissions" in argv and "--strict-mcp-config" in argv and "--mcp-config" not in argv


def test_extra_env():
    assert claude.parse_extra_env(["IS_SANDBOX=1", "A_B=x=y", "EMPTY="]) == {
        "IS_SANDBOX": "1", "A_B": "x=y", "EMPTY": ""}
    for bad in ("NOEQUALS", "=v", "BAD-KEY=1", "A B=1"):
        with pytest.raises(ValueError, match="extra_env: .* is not KEY=VALUE"):
            claude.parse_extra_env([bad])
    env = claude.child_env({"PATH": "/bin", "PWD": "/elsewhere"}, {"X": "1"}, Path("/w"))
    assert env == {"PATH": "/bin", "PWD": "/w", "X": "1"}


def test_stream_state_reads_init_text_and_result():
    s = StreamState()
    assert s.feed(b"\n") is None and s.feed(b"not json\n") is None and s.bad_lines == 1
    assert s.feed(json.dumps({"type": "system", "subtype": "session_title_changed",
                              "session_id": "x"}).encode()) is None
    assert s.feed(json.dumps({"type": "system", "subtype": "init", "session_id": "sid",
                              "model": "m"}).encode()) == "init"
    assert (s.init_seen, s.session_id, s.model) == (True, "sid", "m")
    s.feed(json.dumps({"type": "assistant",
                       "message": {"content": [{"type": "text", "text": "hello"}, {"type": "tool_use"}]}}).encode())
    assert s.last_text == "hello"
    assert s.feed(json.dumps({"type": "result", "subtype": "success", "result": "r" * 100_000}).encode()) == "result"
    assert len(s.result["result"]) == claude.RESULT_KEEP


OK = {"type": "result", "subtype": "success", "is_error": False, "result": "done", "total_cost_usd": 0.5}
API_ERROR = {"type": "result", "subtype": "success", "is_error": True, "api_error_status": 500,
             "result": "API Error: 500"}
ABORTED = {"type": "result", "subtype": "error_during_execution", "is_error": True,
           "terminal_reason": "aborted_streaming"}


@pytest.mark.parametrize(
    "result, rc, sent, kind, without",
    [
        (OK, 0, {}, "completed", False),
        (API_ERROR, 1, {}, "error", False),
        (ABORTED, 0, {"SIGINT": "interrupt"}, "interrupted", False),
        (ABORTED, 0, {}, "error", False),  # an abort nobody asked for is claude's failure
        (None, 0, {"SIGINT": "interrupt"}, "interrupted", True),  # stream-json + SIGINT: often no result line
        (None, -9, {"SIGINT": "interrupt", "SIGKILL": "grace"}, "killed", True),
        (None, -9, {}, "killed", True),  # the OOM killer, say
        (None, -15, {}, "interrupted", True),
        (None, 0, {}, "interrupted", True),  # exited without a result counts as interrupted
        (None, 1, {}, "error", True),  # ... unless claude exited with a failure status: then stderr says why
    ],
)
def test_outcome_table(result, rc, sent, kind, without):
    outcome = classify(result, rc, sent, stderr_tail="Error: boom", last_text="partial")
    assert (outcome.kind, outcome.exited_without_result) == (kind, without)
    if kind == "completed":
        assert outcome.result_text == "done" and outcome.cost_usd == 0.5
    if result is None and rc == 1:
        assert outcome.detail == "claude exited with status 1 without a result: Error: boom"
    if sent:
        assert all(sig in outcome.detail for sig in sent)
