"""The daemons' stderr handler (common/event_log.DaemonLogHandler): an event's line, which it builds itself to
keep the logging module's record off every run's path, reads exactly as the formatter of that log format
would write it; any other line goes through the formatter; a second handler on the root (a test's, an
embedding program's) gets the events through the logging module as before."""

from __future__ import annotations

import json
import logging
import os
import re
from datetime import datetime

import pytest

from common import event_log
from common.event_log import DaemonLogHandler, event

FIELDS = {"task": "ab12cd34", "outcome": "killed", "exit_code": None, "signal": 9, "seconds": 1.23456,
          "saved": True, "note": 'a "quoted" value'}


@pytest.fixture
def daemon_log(tmp_path, monkeypatch):
    """configure() as a daemon calls it, its fd 2 a file: (set the format, read the lines)."""
    path = tmp_path / "stderr.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    monkeypatch.setattr(event_log, "_daemon_handler", None)

    def configure(log_format: str) -> DaemonLogHandler:
        root.handlers.clear()
        event_log.configure("debug", log_format)
        handler = event_log._daemon_handler
        assert handler is not None and root.handlers == [handler]
        handler.fd = fd
        return handler

    def lines() -> list[str]:
        return path.read_text().splitlines()

    yield configure, lines
    root.handlers[:], root.level = saved
    os.close(fd)


def _record_line(handler: DaemonLogHandler, logger: logging.Logger, shown: dict) -> str:
    """What the formatter makes of the same event given as a record (its time taken from `created`)."""
    record = logger.makeRecord(logger.name, logging.WARNING, __file__, 0, "%s", (event_log.key_values(shown),),
                               None, extra={event_log.FIELDS_KEY: shown})
    return handler.format(record)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_an_events_line_is_what_the_formatter_writes(daemon_log, log_format):
    configure, lines = daemon_log
    handler = configure(log_format)
    logger = logging.getLogger("hivebash.processes.lifecycle")
    event(logger, "task_end", logging.WARNING, **FIELDS)
    (written,) = lines()
    shown = {"event": "task_end", **FIELDS, "seconds": 1.235}
    expected = _record_line(handler, logger, shown)
    if log_format == "json":
        got, want = json.loads(written), json.loads(expected)
        stamps = [datetime.strptime(line.pop("time"), "%Y-%m-%dT%H:%M:%S.%fZ") for line in (got, want)]
        assert abs((stamps[0] - stamps[1]).total_seconds()) < 2  # the two were taken a moment apart
        assert got == want and got["level"] == "warning" and got["signal"] == 9 and got["exit_code"] is None
    else:
        # time (to the millisecond, taken apart), then the level, the logger and the fields as the formatter has them
        assert written.split(" ", 2)[2] == expected.split(" ", 2)[2]
        assert written[:10] == expected[:10] and re.fullmatch(r"\d\d:\d\d:\d\d,\d{3}", written.split(" ", 2)[1])
        assert 'note="a \\"quoted\\" value"' in written and "exit_code=- " in written


def test_other_lines_and_tracebacks_go_through_the_formatter(daemon_log):
    configure, lines = daemon_log
    configure("text")
    log = logging.getLogger("hivebash.engine")
    log.info("serving MCP on %s", "http://127.0.0.1:1/mcp")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("a handler failed")
    got = lines()
    assert got[0].endswith(" INFO hivebash.engine: serving MCP on http://127.0.0.1:1/mcp")
    assert got[1].endswith(" ERROR hivebash.engine: a handler failed")
    assert got[2] == "Traceback (most recent call last):" and got[-1] == "ValueError: boom"


def test_a_second_handler_gets_the_events_through_logging(daemon_log):
    configure, lines = daemon_log
    handler = configure("text")
    seen: list[logging.LogRecord] = []
    listener = logging.Handler()
    listener.emit = seen.append
    logging.getLogger().addHandler(listener)
    logger = logging.getLogger("hivesubagent.turns.runner")
    assert not handler.sole_handler_of(logger)
    event(logger, "turn_end", name="fix-tests", outcome="done")
    assert [r.getMessage() for r in seen] == ["event=turn_end name=fix-tests outcome=done"]
    assert getattr(seen[0], event_log.FIELDS_KEY) == {"event": "turn_end", "name": "fix-tests", "outcome": "done"}
    assert lines()[0].endswith(" INFO hivesubagent.turns.runner: event=turn_end name=fix-tests outcome=done")


def test_a_level_that_is_off_writes_nothing(daemon_log):
    configure, lines = daemon_log
    configure("text")
    logging.getLogger().setLevel(logging.INFO)
    event(logging.getLogger("hivebash.processes.lifecycle"), "task_start", logging.DEBUG, task="ab12cd34")
    assert lines() == []
