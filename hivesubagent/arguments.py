"""The subagent tools' arguments, checked before anything runs: a clear error naming the field and the rule."""

from __future__ import annotations

import math
import os
import stat
from typing import Any

from common.config import SubagentSettings
from common.names import InvalidName, check_name
from hivesubagent.errors import SubagentError
from hivesubagent.turns.turn import TurnBounds


def session_name(name: Any) -> str:
    try:
        return check_name(name, "name")
    except InvalidName as exc:
        raise SubagentError(str(exc)) from None


def budget_usd(value: Any, default: float | None) -> float | None:
    """A turn's --max-budget-usd: the caller's, else the daemon's default (none when unset)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise SubagentError(f"max_budget_usd: must be a number of US dollars > 0 (got {value!r})")
    return float(value)


def max_turns(value: Any, default: int) -> int | None:
    """A turn's --max-turns: the caller's, else the daemon's default (0 there: none)."""
    if value is None:
        return default or None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SubagentError(f"max_turns: must be a whole number of model calls >= 1 (got {value!r})")
    return value


def timeout_seconds(minutes: Any, default_seconds: float) -> float | None:
    """A turn's time limit in seconds, from the caller's `timeout_minutes` (fractions allowed), else the
    daemon's --turn-timeout (0 there: none)."""
    if minutes is None:
        return default_seconds or None
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not math.isfinite(minutes) or minutes <= 0:
        raise SubagentError(f"timeout_minutes: must be a number of minutes > 0 (got {minutes!r})")
    return float(minutes) * 60


def turn_bounds(settings: SubagentSettings, max_budget_usd: Any = None, turns: Any = None,
                timeout_minutes: Any = None) -> TurnBounds:
    """A turn's caps: each the caller's, else the daemon's default."""
    return TurnBounds(budget_usd(max_budget_usd, settings.max_budget_usd), max_turns(turns, settings.max_turns),
                      timeout_seconds(timeout_minutes, settings.turn_timeout))


def prompt_text(value: Any, field_name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SubagentError(f"{field_name}: must be a non-empty text (claude -p refuses an empty prompt)")
    if "\0" in value:
        raise SubagentError(f"{field_name}: must not contain NUL characters")
    return value


def open_prompt_file(path: Any) -> int:
    """Open `prompt_file` for claude: an absolute path to an existing, readable regular file.

    Opened with O_NONBLOCK, then fstat'ed: a FIFO never blocks the daemon (open of a FIFO for reading would
    wait for a writer), and what is checked is what claude reads: it gets this very descriptor as /dev/fd/N,
    so the file cannot be swapped between the check and the read. A symlink to a regular file is fine."""
    if not isinstance(path, str) or not path:
        raise SubagentError("prompt_file: must be a non-empty path")
    if "\0" in path:
        raise SubagentError("prompt_file: must not contain NUL characters")
    if not os.path.isabs(path):
        raise SubagentError(f"prompt_file: {path!r} must be an absolute path")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SubagentError(f"prompt_file: {path} does not exist") from None
    except PermissionError:
        raise SubagentError(f"prompt_file: {path} is not readable (permission denied)") from None
    except IsADirectoryError:
        raise SubagentError(f"prompt_file: {path} is a directory, not a regular file") from None
    except OSError as exc:
        raise SubagentError(f"prompt_file: cannot open {path}: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
                stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}.get(stat.S_IFMT(mode),
                                                                                        "not a regular file")
        raise SubagentError(f"prompt_file: {path} is {kind}, not a regular file")
    os.set_blocking(fd, True)
    return fd
