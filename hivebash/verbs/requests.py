"""The one place the bash engine checks a request: each verb's arguments become one checked, frozen request
value (`RunRequest`, `StatusRequest`, `SendRequest`, `KillRequest`, `ListRequest`) before anything changes,
and every refusal names the field and the rule.

The tool schemas refuse most bad input first; these checks hold for every caller of the engine (the tools, the
CLI through them, tests and benches in process) and cover what a schema cannot say (encoded size, NUL, an
existing directory, fields that go together).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from common.names import InvalidName, check_name
from common.protocol.tools import refuse_unknown_arguments
from common.waiting import DEFAULT_WAIT_SECONDS, WaitWindow, cap_wait
from hivebash import output_views as ov
from hivebash.errors import EngineError
from hivebash.stdin.keys import KEYS, LISTED, MAX_KEYS
from hivebash.stdin.task_input import KINDS, NULL
from hivebash.tasks import task as T
from hivebash.tasks.task import check_id

MAX_CMD_BYTES = 64 * 1024  # the schema says characters; the engine checks the encoded size too
MAX_IDS = 20  # tasks one status may name
SEND_LIMIT = 64 * 1024  # bytes one send may write (text, newline and keys)
SEND_WAIT_DEFAULT = 2.0  # seconds
KILL_WAIT_SECONDS = 2.0  # how long a kill waits for the end by default
STATUS_VIEW_FIELDS = ("grep", "context", "from_line", "max_lines", "stream", "new_only", "tail_lines")
# The arguments each verb takes (an engine caller that bypasses the tool schemas is refused any other).
RUN_FIELDS = ("cmd", "timeout_secs", "wait_seconds", "wait_for", "stdin", "name", "cwd")
STATUS_FIELDS = ("id", "ids", "all", "wait_seconds", "wait_for", *STATUS_VIEW_FIELDS)
SEND_FIELDS = ("id", "text", "keys", "enter", "eof", "wait_seconds", "wait_for")
KILL_FIELDS = ("id", "force", "wait_seconds")
LIST_FIELDS = ("state", "limit", "offset")


@dataclass(frozen=True)
class Limits:
    """What the checks need of the daemon: the directory a task runs in by default, the inline-wait cap."""

    default_cwd: str
    wait_cap: float


@dataclass(frozen=True)
class RunRequest:
    """A checked `run`: what the task will be, and how long the call waits for it."""

    cmd: str
    timeout_secs: float | None
    cwd: str
    window: WaitWindow
    wait_for: str | None = None
    stdin: str = NULL
    name: str | None = None


@dataclass(frozen=True)
class StatusRequest:
    """A checked `status`: the tasks (`many`: named by `ids`), the wait and the view of the output."""

    ids: list[str]
    many: bool
    window: WaitWindow
    wait_for: str | None = None
    view: ov.ViewRequest = ov.ViewRequest()
    every: bool = False


@dataclass(frozen=True)
class SendRequest:
    """A checked `send`: the bytes to write and what to do after."""

    task_id: str
    data: bytes
    eof: bool
    window: WaitWindow
    wait_for: str | None
    keyed: bool  # keys were pressed (a tty's only)


@dataclass(frozen=True)
class KillRequest:
    task_id: str
    force: bool
    window: WaitWindow


@dataclass(frozen=True)
class ListRequest:
    state: str | None = None
    limit: int | None = None
    offset: int = 0


def check_run(args: Mapping[str, Any], limits: Limits) -> RunRequest:
    refuse_unknown_arguments("run", args, RUN_FIELDS, EngineError)
    cmd, timeout_secs, cwd = args.get("cmd"), args.get("timeout_secs"), args.get("cwd")
    if not isinstance(cmd, str) or not cmd.strip():
        raise EngineError("cmd: is required and must be a non-empty shell command")
    if len(cmd.encode("utf-8", "surrogatepass")) > MAX_CMD_BYTES:
        raise EngineError(f"cmd: must be at most {MAX_CMD_BYTES} bytes (write long scripts to a file and run that)")
    if "\x00" in cmd:
        raise EngineError("cmd: must not contain NUL characters")
    timeout = _timeout(timeout_secs)
    window = _window(args.get("wait_seconds"), DEFAULT_WAIT_SECONDS, limits.wait_cap)
    cwd_path = limits.default_cwd if cwd is None else _cwd(cwd)
    wait_for = _wait_for(args.get("wait_for"))
    stdin = _stdin(args.get("stdin"))
    name = args.get("name")
    if name is not None:
        name = _name(name)
    return RunRequest(cmd, timeout, cwd_path, window, wait_for, stdin, name)


def _timeout(timeout_secs: object) -> float | None:
    if timeout_secs is None:
        return None
    if isinstance(timeout_secs, bool) or not isinstance(timeout_secs, (int, float)) or not timeout_secs > 0:
        raise EngineError("timeout_secs: must be a positive number of seconds")
    if timeout_secs > 10**9:
        raise EngineError("timeout_secs: must be at most 1000000000")
    return float(timeout_secs)


def _cwd(cwd: object) -> str:
    if not isinstance(cwd, str) or not cwd or "\x00" in cwd:
        raise EngineError("cwd: must be a path to an existing directory")
    path = os.path.abspath(cwd)
    if not os.path.isdir(path):
        raise EngineError(f"cwd: {cwd!r} is not an existing directory")
    return path


def check_status(args: Mapping[str, Any], limits: Limits) -> StatusRequest:
    refuse_unknown_arguments("status", args, STATUS_FIELDS, EngineError)
    view = check_view(*(args.get(f) for f in STATUS_VIEW_FIELDS))
    ids, every = args.get("ids"), args.get("all", False)
    if ids is not None and view != ov.ViewRequest():
        raise EngineError("ids: shows one line a task; ask for a view (grep, from_line, tail_lines, stream, "
                          "new_only) with id")
    if every and ids is None:
        raise EngineError("all: goes with ids (wait until every one of several tasks has ended)")
    window = _window(args.get("wait_seconds"), 0.0, limits.wait_cap)
    wait_for = _wait_for(args.get("wait_for"))
    return StatusRequest(_ids(args.get("id"), ids), ids is not None, window, wait_for, view, bool(every))


def check_send(args: Mapping[str, Any], limits: Limits) -> SendRequest:
    """The bytes of one send, or a refusal naming the field and what to do."""
    refuse_unknown_arguments("send", args, SEND_FIELDS, EngineError)
    text, keys, enter, eof = args.get("text"), args.get("keys"), args.get("enter"), args.get("eof")
    if text is None and keys is None and not eof and enter is not True:
        raise EngineError("send: nothing to send; give text (a line to type), keys (e.g. [\"ctrl-c\"]) or eof: true")
    if text is not None and not isinstance(text, str):
        raise EngineError("text: must be a string")
    for field, value in (("enter", enter), ("eof", eof)):
        if value is not None and not isinstance(value, bool):
            raise EngineError(f"{field}: must be true or false")
    window = _window(args.get("wait_seconds"), SEND_WAIT_DEFAULT, limits.wait_cap)
    wait_for = _wait_for(args.get("wait_for"))
    try:
        data = (text or "").encode("utf-8")
    except UnicodeEncodeError:
        raise EngineError("text: must be valid Unicode (no lone surrogates)") from None
    newline = enter if enter is not None else text is not None
    pressed = key_bytes(keys) if keys is not None else b""
    size = len(data) + bool(newline) + len(pressed)
    if size > SEND_LIMIT:
        raise EngineError(f"text: at most {SEND_LIMIT} bytes in one send ({size} asked); write bigger input to a "
                          "file and redirect it, e.g. run(cmd=\"prog < input.txt\")")
    return SendRequest(check_id(args.get("id")), data + (b"\n" if newline else b"") + pressed, bool(eof), window,
                       wait_for, keys is not None)


def check_kill(args: Mapping[str, Any], limits: Limits) -> KillRequest:
    refuse_unknown_arguments("kill", args, KILL_FIELDS, EngineError)
    force = args.get("force", False)
    if not isinstance(force, bool):
        raise EngineError("force: must be true or false")
    return KillRequest(check_id(args.get("id")), force, _window(args.get("wait_seconds"), KILL_WAIT_SECONDS,
                                                                 limits.wait_cap))


def check_list(args: Mapping[str, Any]) -> ListRequest:
    refuse_unknown_arguments("list", args, LIST_FIELDS, EngineError)
    state, limit, offset = args.get("state"), args.get("limit"), args.get("offset", 0)
    if state is not None and state not in T.SHOWN:
        raise EngineError(f"state: must be one of {', '.join(T.STATE_ORDER)}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise EngineError("limit: must be an integer >= 1")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise EngineError("offset: must be an integer >= 0")
    return ListRequest(state, limit, offset)


def check_view(grep: Any = None, context: Any = None, from_line: Any = None, max_lines: Any = None,
               stream: Any = None, new_only: Any = None, tail_lines: Any = None) -> ov.ViewRequest:
    """The view a status asks for, or a ViewError naming the field and the rule. `max_lines` alone reads the
    last lines. The type checks repeat the schema's, so any caller gets a ViewError that names the field."""
    _check_plain_view_fields(stream, new_only, tail_lines)
    chosen = [name for name, value in (("grep", grep), ("from_line", from_line), ("new_only", new_only or None),
                                       ("tail_lines", tail_lines)) if value is not None]
    if len(chosen) > 1:
        raise ov.ViewError(f"{chosen[1]}: cannot be combined with {chosen[0]} (one view per call)")
    if context is not None and grep is None:
        raise ov.ViewError("context: goes with grep (lines around each match)")
    if max_lines is not None and from_line is None and (grep is not None or new_only or tail_lines is not None):
        raise ov.ViewError("max_lines: goes with from_line, or alone for the last lines (not with another view)")
    if max_lines is not None and from_line is None:
        from_line = (-max_lines if isinstance(max_lines, int) and not isinstance(max_lines, bool) and max_lines > 0
                     else 0)
    if grep is not None:
        ov.compile_pattern(grep)
    context = 0 if context is None else context
    if isinstance(context, bool) or not isinstance(context, int) or not 0 <= context <= ov.CONTEXT_MAX:
        raise ov.ViewError(f"context: must be an integer from 0 to {ov.CONTEXT_MAX}")
    max_lines = ov.DEFAULT_MAX_LINES if max_lines is None else max_lines
    if isinstance(max_lines, bool) or not isinstance(max_lines, int) or not 1 <= max_lines <= ov.MAX_LINES_MAX:
        raise ov.ViewError(f"max_lines: must be an integer from 1 to {ov.MAX_LINES_MAX}")
    if from_line is not None and (isinstance(from_line, bool) or not isinstance(from_line, int) or from_line == 0):
        raise ov.ViewError("from_line: must be a non-zero integer (the first line is 1; -20 starts 20 lines from "
                           "the end)")
    return ov.ViewRequest(grep, context, from_line, max_lines, stream, bool(new_only), tail_lines)


def _check_plain_view_fields(stream: object, new_only: object, tail_lines: object) -> None:
    if stream is not None and stream not in ov.STREAMS:
        raise ov.ViewError('stream: must be "stdout" or "stderr" (omit it for both)')
    if new_only is not None and not isinstance(new_only, bool):
        raise ov.ViewError("new_only: must be true or false")
    if tail_lines is not None and (isinstance(tail_lines, bool) or not isinstance(tail_lines, int)
                                   or not 1 <= tail_lines <= ov.MAX_LINES_MAX):
        raise ov.ViewError(f"tail_lines: must be an integer from 1 to {ov.MAX_LINES_MAX}")


def key_bytes(keys: object) -> bytes:
    """The bytes of `keys` pressed in order, or a refusal naming the unknown key."""
    if not isinstance(keys, list) or not keys or len(keys) > MAX_KEYS:
        raise EngineError(f"keys: must be a list of 1 to {MAX_KEYS} key names, e.g. [\"ctrl-c\"]")
    out = bytearray()
    for i, key in enumerate(keys):
        code = KEYS.get(key.lower()) if isinstance(key, str) else None
        if code is None:
            raise EngineError(f"keys[{i}]: unknown key {key!r}; known: {LISTED}, ctrl-a to ctrl-z, home, end, "
                              "delete, pageup, pagedown, space (plain characters go in text)")
        out += code
    return bytes(out)


def _window(wait_seconds: Any, default: float, cap: float) -> WaitWindow:
    if wait_seconds is not None and (isinstance(wait_seconds, bool) or not isinstance(wait_seconds, (int, float))
                                     or not wait_seconds >= 0):
        raise EngineError("wait_seconds: must be a number >= 0")
    return cap_wait(wait_seconds, default=default, cap=cap)


def _wait_for(wait_for: Any) -> str | None:
    if wait_for is None:
        return None
    try:
        ov.compile_pattern(wait_for)
    except ov.ViewError as exc:
        raise EngineError(str(exc).replace("grep:", "wait_for:", 1)) from None
    return wait_for


def _stdin(stdin: object) -> str:
    if stdin is None:
        return NULL
    if stdin not in KINDS:
        raise EngineError('stdin: must be "null" (no input, the default), "pipe" (send writes to it) or "tty" '
                          '(a terminal: prompts, passwords, REPLs)')
    return str(stdin)


def _name(name: object) -> str:
    try:
        return check_name(name, "name")
    except InvalidName as exc:
        raise EngineError(str(exc)) from None


def _ids(task_id: object, ids: object) -> list[str]:
    """The ids a status is about: `id`, or the list `ids` (not both)."""
    if ids is None:
        if task_id is None:
            raise EngineError("id: is required (or ids: a list of task ids)")
        return [check_id(task_id)]
    if task_id is not None:
        raise EngineError("ids: cannot be combined with id (give one or the other)")
    if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_IDS:
        raise EngineError(f"ids: must be a list of 1 to {MAX_IDS} task ids")
    if len(set(map(str, ids))) != len(ids):
        raise EngineError("ids: must not name a task twice")
    return [check_id(i) for i in ids]
