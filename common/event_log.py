"""A daemon's log for journald and log collectors: one line a record, and for each notable event (a task's
end, a tool call refused or failed, a turn's start and end; at debug also a task's start and every call)
stable `key=value` fields that a query can filter on (`event=task_end outcome=killed`), or one JSON object a
line with `--log-format json`.

`event(logger, name, **fields)` logs one. Fields are scalars the daemon chose: ids, tool names, outcomes,
seconds, counts. Never a command, a prompt, an argument's value, output bytes or a token (they may hold
secrets, and journald keeps them for weeks); tests/common/test_event_log.py reads a real daemon's log for
them. The text line keeps the time and level in front, as the daemon always wrote them, so a terminal and
`journalctl` read it as before; the fields follow the message."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Mapping
from typing import Any, Literal

Scalar = str | int | float | bool | None
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FIELDS_KEY = "hive_fields"  # the LogRecord attribute an event's fields ride on


def event(logger: logging.Logger, name: str, level: int = logging.INFO, /, **fields: Scalar) -> None:
    """Log the event `name` with its fields (a float is rounded to milliseconds); nothing is built when the
    level is off. Where the daemon's own handler is the only one the line reaches, it writes the line itself
    (DaemonLogHandler.write_event)."""
    if not logger.isEnabledFor(level):
        return
    shown: dict[str, Scalar] = {"event": name}
    for key, value in fields.items():
        shown[key] = round(value, 3) if isinstance(value, float) else value
    handler = _daemon_handler
    if handler is not None and handler.sole_handler_of(logger):
        handler.write_event(logger.name, level, shown)
    else:
        logger.log(level, "%s", key_values(shown), extra={FIELDS_KEY: shown})


_QUOTED_FOR = re.compile(r'[ ="\\]')  # a value holding one of these is quoted


def _value(value: Scalar) -> str:
    if value is None:
        return "-"
    if value is True or value is False:
        return "true" if value else "false"
    text = str(value)
    if text and text.isprintable() and not _QUOTED_FOR.search(text):
        return text
    return json.dumps(text)  # quoted, with its quotes, backslashes and control characters escaped


def key_values(fields: Mapping[str, Scalar]) -> str:
    """`k=v k2="a b"`: a value with a space, `=`, a quote, a backslash or a control character is quoted as a
    JSON string; None is `-`."""
    return " ".join([f"{key}={_value(value)}" for key, value in fields.items()])


def _json_line(created: float, level: str, logger: str, message: str) -> dict[str, Any]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return {"time": f"{stamp}.{int((created - int(created)) * 1000):03d}Z", "level": level.lower(),
            "logger": logger, "message": message}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (ISO 8601, UTC), level, logger, message, an event's fields, and the
    traceback of an exception as one string."""

    def format(self, record: logging.LogRecord) -> str:
        line = _json_line(record.created, record.levelname, record.name, record.getMessage())
        fields = getattr(record, FIELDS_KEY, None)
        if fields:
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class DaemonLogHandler(logging.Handler):
    """A daemon's stderr, each line one write(2) (whole lines from threads never interleave, and no lock is
    held across the write). An event's line is built here directly, the same text the formatter would give:
    a task's end is logged on every run's path, and the logging module's record, lookups and formatting
    cost about 5% of the daemon's CPU a task under load (scripts/cpu_pair, docs/performance.md)."""

    def __init__(self, log_format: Literal["text", "json"], fd: int = 2) -> None:
        super().__init__()
        self.fd, self.json = fd, log_format == "json"
        self.setFormatter(JsonFormatter() if self.json else logging.Formatter(TEXT_FORMAT))
        self._second: tuple[int, str] = (-1, "")  # the last second's local time, as text

    def handle(self, record: logging.LogRecord) -> bool:
        if self.filter(record):
            self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._write(self.format(record))
        except Exception:  # noqa: BLE001 as logging's own handlers: a line that cannot be written never stops the daemon
            self.handleError(record)

    def sole_handler_of(self, logger: logging.Logger) -> bool:
        """Whether a line of `logger` reaches this handler and nothing else (no handler or filter of its own)."""
        root = logging.root
        return (not logger.handlers and not logger.filters and logger.propagate and logger.parent is root
                and not root.filters and not self.filters and root.handlers == [self])

    def write_event(self, logger: str, level: int, fields: dict[str, Scalar]) -> None:
        created, level_name = time.time(), logging.getLevelName(level)
        if self.json:
            line = _json_line(created, level_name, logger, key_values(fields))
            line.update(fields)
            text = json.dumps(line, ensure_ascii=False, default=str)
        else:
            text = f"{self._local_time(created)} {level_name} {logger}: {key_values(fields)}"
        try:
            self._write(text)
        except OSError:  # stderr gone: nothing else can say so
            pass

    def _local_time(self, created: float) -> str:
        second, shown = self._second
        if int(created) != second:
            second, shown = int(created), time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created))
            self._second = (second, shown)
        return f"{shown},{int((created - second) * 1000):03d}"

    def _write(self, text: str) -> None:
        view = memoryview((text + "\n").encode("utf-8", "backslashreplace"))
        while view:
            view = view[os.write(self.fd, view):]


_daemon_handler: DaemonLogHandler | None = None


def configure(level: str, log_format: Literal["text", "json"] = "text") -> None:
    """The root logger of a daemon: stderr (journald under systemd), the level and the format asked (as
    logging.basicConfig: a process whose root logger has a handler already keeps it)."""
    global _daemon_handler
    if logging.root.handlers:
        return
    _daemon_handler = DaemonLogHandler(log_format)
    logging.basicConfig(level=level.upper(), handlers=[_daemon_handler])
