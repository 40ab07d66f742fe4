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
import time
from collections.abc import Mapping
from typing import Any, Literal

Scalar = str | int | float | bool | None
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FIELDS_KEY = "hive_fields"  # the LogRecord attribute an event's fields ride on


def event(logger: logging.Logger, name: str, level: int = logging.INFO, /, **fields: Scalar) -> None:
    """Log the event `name` with its fields (a float is rounded to milliseconds); nothing is built when the
    level is off."""
    if not logger.isEnabledFor(level):
        return
    shown: dict[str, Scalar] = {"event": name}
    for key, value in fields.items():
        shown[key] = round(value, 3) if isinstance(value, float) else value
    logger.log(level, "%s", key_values(shown), extra={FIELDS_KEY: shown})


def _value(value: Scalar) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if text and not any(c in text for c in ' ="\\') and text.isprintable():
        return text
    return json.dumps(text)  # quoted, with its quotes, backslashes and control characters escaped


def key_values(fields: Mapping[str, Scalar]) -> str:
    """`k=v k2="a b"`: a value with a space, `=`, a quote, a backslash or a control character is quoted as a
    JSON string; None is `-`."""
    return " ".join(f"{key}={_value(value)}" for key, value in fields.items())


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (ISO 8601, UTC), level, logger, message, an event's fields, and the
    traceback of an exception as one string."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, FIELDS_KEY, None)
        if fields:
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(level: str, log_format: Literal["text", "json"] = "text") -> None:
    """The root logger of a daemon: stderr (journald under systemd), the level and the format asked (as
    logging.basicConfig: a process whose root logger has a handler already keeps it)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])
