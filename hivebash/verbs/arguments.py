"""The checks of every request's arguments, before anything changes: each refusal names the field and the rule.

The tool schemas refuse most bad input first; these checks hold for every caller of the engine (the CLI and
tests call it directly) and cover what a schema cannot say (encoded size, NUL, an existing directory).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from common.names import InvalidName, check_name
from common.waiting import WaitWindow, cap_wait
from hivebash import output_views as ov
from hivebash.errors import EngineError
from hivebash.tasks import task as T

MAX_CMD_BYTES = 64 * 1024  # the schema says characters; the engine checks the encoded size too
MAX_IDS = 20  # tasks one status may name


@dataclass(frozen=True)
class RunRequest:
    """A checked `run`: what the task will be."""

    cmd: str
    timeout_secs: float | None
    cwd: str
    window: WaitWindow


def check_run(cmd: Any, timeout_secs: Any, wait_seconds: Any, cwd: Any, default_cwd: str,
              wait_cap: float) -> RunRequest:
    if not isinstance(cmd, str) or not cmd.strip():
        raise EngineError("cmd: is required and must be a non-empty shell command")
    if len(cmd.encode("utf-8", "surrogatepass")) > MAX_CMD_BYTES:
        raise EngineError(f"cmd: must be at most {MAX_CMD_BYTES} bytes (write long scripts to a file and run that)")
    if "\x00" in cmd:
        raise EngineError("cmd: must not contain NUL characters")
    if timeout_secs is not None:
        if isinstance(timeout_secs, bool) or not isinstance(timeout_secs, (int, float)) or not timeout_secs > 0:
            raise EngineError("timeout_secs: must be a positive number of seconds")
        if timeout_secs > 10**9:
            raise EngineError("timeout_secs: must be at most 1000000000")
        timeout_secs = float(timeout_secs)
    check_wait_seconds(wait_seconds)
    if cwd is None:
        cwd_path = default_cwd
    else:
        if not isinstance(cwd, str) or not cwd or "\x00" in cwd:
            raise EngineError("cwd: must be a path to an existing directory")
        cwd_path = os.path.abspath(cwd)
        if not os.path.isdir(cwd_path):
            raise EngineError(f"cwd: {cwd!r} is not an existing directory")
    return RunRequest(cmd, timeout_secs, cwd_path, cap_wait(wait_seconds, cap=wait_cap))


def check_wait_seconds(wait_seconds: Any) -> None:
    if wait_seconds is not None and (isinstance(wait_seconds, bool) or not isinstance(wait_seconds, (int, float))
                                     or not wait_seconds >= 0):
        raise EngineError("wait_seconds: must be a number >= 0")


def check_name_argument(name: str) -> str:
    try:
        check_name(name, "name")
    except InvalidName as exc:
        raise EngineError(str(exc)) from None
    return name


def check_list(state: Any, limit: Any) -> None:
    if state is not None and state not in T.SHOWN:
        raise EngineError(f"state: must be one of {', '.join(T.STATE_ORDER)}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise EngineError("limit: must be an integer >= 1")


def check_wait_for(wait_for: object) -> None:
    if wait_for is not None:
        try:
            ov.compile_pattern(wait_for)
        except ov.ViewError as exc:
            raise EngineError(str(exc).replace("grep:", "wait_for:", 1)) from None


def check_ids(task_id: str | None, ids: object) -> list[str]:
    """The ids a status is about: `id`, or the list `ids` (not both)."""
    if ids is None:
        if task_id is None:
            raise EngineError("id: is required (or ids: a list of task ids)")
        return [task_id]
    if task_id is not None:
        raise EngineError("ids: cannot be combined with id (give one or the other)")
    if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_IDS:
        raise EngineError(f"ids: must be a list of 1 to {MAX_IDS} task ids")
    if len(set(map(str, ids))) != len(ids):
        raise EngineError("ids: must not name a task twice")
    return list(ids)
