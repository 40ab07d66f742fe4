"""A real bash daemon's log for journald: each notable event (a task's end, a tool call refused or failed; at
--log-level debug also a task's start and every call) is one line whose fields parse as key=value, or, with
--log-format json, every line is one JSON object with the same fields; neither holds the command or a byte
of the task's output."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from daemon_harness import wait_until
from kit.daemons_kit import BashDaemon

from common.event_log import key_values

SECRET_CMD = "printf 'OUTPUT-%s' 7f3a; echo hunter2-in-the-command >/dev/null; exit 3"
FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def parse_key_values(text: str) -> dict[str, str]:
    """key=value pairs as a logfmt reader takes them: a quoted value is a JSON string."""
    fields = {}
    for key, value in FIELD.findall(text):
        fields[key] = json.loads(value) if value.startswith('"') else value
    return fields


def _events(d: BashDaemon, parse) -> list[dict]:
    return [e for e in (parse(line) for line in d.daemon.log().splitlines() if line.strip()) if e.get("event")]


def _text_event(line: str) -> dict:
    _, _, message = line.partition(": ")
    return parse_key_values(message) if message.startswith("event=") else {}


def _drive(d: BashDaemon) -> tuple[str, str]:
    """A task that fails with exit 3, one killed, a refused call, a few quiet reads: (failed id, killed id)."""
    failed = d.call("run", cmd=SECRET_CMD, wait_seconds=10)
    assert failed["status"] == "done" and failed["exit_code"] == 3, failed
    sleeper = d.call("run", cmd="sleep 60", wait_seconds=0)["id"]
    d.call("status", id=failed["id"])
    d.call("list")
    assert d.call_result("status", {"id": "no-such-task"})["isError"]
    assert d.call_result("run", {"cmd": 5})["isError"]
    d.call("kill", id=sleeper, force=True)
    return failed["id"], sleeper


def _check(events: list[dict], failed: str, killed: str, debug: bool) -> None:
    def one(**match) -> dict:
        found = [e for e in events if all(str(e.get(k)) == str(v) for k, v in match.items())]
        assert len(found) == 1, (match, events)
        return found[0]

    end = one(event="task_end", task=failed)
    assert end["outcome"] == "done" and str(end["exit_code"]) == "3" and float(end["seconds"]) >= 0
    assert one(event="task_end", task=killed)["outcome"] == "killed"
    assert one(event="tool_call", tool="status", task="no-such-task")["outcome"] == "error"
    one(event="tool_call", tool="run", outcome="invalid_arguments")
    oks = [e for e in events if e["event"] == "tool_call" and e["outcome"] == "ok"]
    if not debug:  # a call that went well, and a task's start, are debug lines
        assert not oks and not [e for e in events if e["event"] == "task_start"]
        return
    assert int(one(event="task_start", task=failed)["pid"]) > 0
    run = one(event="tool_call", tool="run", task=failed, outcome="ok")
    assert float(run["seconds"]) > 0
    assert one(event="tool_call", tool="kill", task=killed)["outcome"] == "ok"
    assert {e["tool"] for e in oks} == {"run", "status", "list", "kill"}


def _wait_for_ends(d: BashDaemon, parse, killed: str) -> list[dict]:
    def ended() -> list[dict] | None:
        events = _events(d, parse)
        return events if any(e["event"] == "task_end" and e.get("task") == killed for e in events) else None

    return wait_until(ended, 20, "the killed task's end in the log")


def test_text_lines_carry_key_value_fields(tmp_path):
    d = BashDaemon(tmp_path, tmp_path / "state", None, ["--log-level", "debug"]).start()
    try:
        failed, killed = _drive(d)
        _check(_wait_for_ends(d, _text_event, killed), failed, killed, debug=True)
        log = d.daemon.log()
    finally:
        d.stop()
    assert "OUTPUT-" not in log and "7f3a" not in log and "hunter2" not in log


def test_json_lines_are_each_one_object(tmp_path):
    d = BashDaemon(tmp_path, tmp_path / "state", None, ["--log-format", "json"]).start()
    try:
        failed, killed = _drive(d)
        _check(_wait_for_ends(d, json.loads, killed), failed, killed, debug=False)
        log = d.daemon.log()
    finally:
        d.stop()
    lines = [json.loads(line) for line in log.splitlines() if line.strip()]  # every line, not only events
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines), lines[:3]
    assert any(line["message"].startswith("serving MCP on http://") for line in lines)
    assert "OUTPUT-" not in log and "hunter2" not in log


@pytest.mark.parametrize("value, shown", [
    ("abc", "abc"), ("a b", '"a b"'), ('say "hi"', '"say \\"hi\\""'), ("k=v", '"k=v"'), ("", '""'),
    ("line\nbreak", '"line\\nbreak"'), (None, "-"), (True, "true"), (1.5, "1.5"), (3, "3"),
])
def test_a_value_is_quoted_only_when_a_reader_would_misread_it(value, shown):
    text = key_values({"event": "x", "v": value})
    assert text == f"event=x v={shown}"
    parsed = parse_key_values(text)
    assert parsed["v"] == (value if isinstance(value, str) else shown)
    if isinstance(value, str) and value and "\n" not in value:
        assert shlex.split(text)[1] == f"v={value}"  # a shell reads it back the same
