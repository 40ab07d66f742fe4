"""The one place the subagent engine checks a request: each verb's arguments become one checked, frozen request
value (`StartRequest`, `ContinueRequest`, `InterruptRequest`, `StatusRequest`) before anything runs, and every
refusal names the field and the rule.

The tool schemas refuse most bad input first; these checks hold for every caller of the engine (the tools, the
CLI, tests in process) and cover what a schema cannot say (NUL, an openable file, fields that go together).
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from common.config import SubagentSettings
from common.names import InvalidName, check_name
from common.protocol.tools import refuse_unknown_arguments
from common.waiting import WaitWindow, cap_wait
from hivesubagent.errors import SubagentError
from hivesubagent.places.options import ClaudeOptions
from hivesubagent.places.worktrees import within
from hivesubagent.turns.claude import START_NUDGE
from hivesubagent.turns.turn import TurnBounds

# A model id or alias as claude takes it ("opus", "claude-opus-4-5", "sonnet[1m]", a Bedrock ARN); never
# starting with '-', so it cannot be read as a flag.
MODEL_RULE = r"[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]{0,199}"
MAX_NAMES = 32  # sessions one status call may wait on
OPTION_FIELDS = ("tools", "allowed_tools", "disallowed_tools", "effort")
START_FIELDS = ("name", "prompt_file", "model", "trigger", "max_budget_usd", "max_turns", "timeout_minutes", "cwd",
                "worktree", *OPTION_FIELDS)
CONTINUE_FIELDS = ("name", "prompt", "model", "max_budget_usd", "max_turns", "timeout_minutes", *OPTION_FIELDS)
STATUS_FIELDS = ("name", "names", "wait_seconds", "all", "result_offset", "steps", "steps_offset")
StatusKind = Literal["list", "one", "wait", "steps"]


@dataclass(frozen=True)
class StartRequest:
    """A checked `start`: the session, its instructions file (opened when claude is spawned), first prompt, caps."""

    name: str
    prompt_file: str
    prompt: str
    model: str | None
    bounds: TurnBounds
    cwd: Path  # the real path of the directory it works in (default --workdir)
    worktree: bool  # in a git worktree of its own of the repository holding cwd
    options: ClaudeOptions


@dataclass(frozen=True)
class ContinueRequest:
    """A checked `continue`: the session, the turn's prompt, its model (None: the session's), caps and the
    options it gives for this turn (those not given: the session's)."""

    name: str
    prompt: str
    model: str | None
    bounds: TurnBounds
    options: ClaudeOptions


@dataclass(frozen=True)
class InterruptRequest:
    """A checked `interrupt`: the session whose running turn to stop, and how hard."""

    name: str
    force: bool


@dataclass(frozen=True)
class StatusRequest:
    """A checked `status`, by kind: every session (`list`), one (`one`, with a result page from
    `result_offset`), a wait on `names` (`wait`; `single`: asked by name) or one session's steps (`steps`)."""

    kind: StatusKind
    names: tuple[str, ...] = ()
    single: bool = True
    window: WaitWindow = cap_wait(None, default=0.0)
    every: bool = False
    result_offset: int | None = None
    steps_offset: int = 0


def check_start(args: Mapping[str, Any], settings: SubagentSettings, workdir: Path | None = None,
                roots: tuple[Path, ...] | None = None) -> StartRequest:
    """`workdir` and `roots`: the engine's resolved --workdir and --allowed-cwd-roots (else from `settings`)."""
    refuse_unknown_arguments("start", args, START_FIELDS, SubagentError)
    name, trigger = session_name(args.get("name")), args.get("trigger")
    prompt = START_NUDGE if trigger is None else prompt_text(trigger, "trigger")
    model, bounds, path = model_name(args.get("model")), _bounds_of(args, settings), args.get("prompt_file")
    workdir = workdir or Path(settings.workdir).expanduser().resolve()
    cwd = working_directory(args.get("cwd"), roots or cwd_roots(settings.allowed_cwd_roots, workdir), workdir)
    return StartRequest(name, _prompt_path(path), prompt, model, bounds, cwd,
                        _flag(args.get("worktree", False), "worktree"), claude_options(args))


def check_continue(args: Mapping[str, Any], settings: SubagentSettings) -> ContinueRequest:
    refuse_unknown_arguments("continue", args, CONTINUE_FIELDS, SubagentError)
    return ContinueRequest(session_name(args.get("name")), prompt_text(args.get("prompt"), "prompt"),
                           model_name(args.get("model")), _bounds_of(args, settings), claude_options(args))


def check_interrupt(args: Mapping[str, Any]) -> InterruptRequest:
    refuse_unknown_arguments("interrupt", args, ("name", "force"), SubagentError)
    return InterruptRequest(session_name(args.get("name")), _flag(args.get("force", False), "force"))


def check_status(args: Mapping[str, Any]) -> StatusRequest:
    """The kind of status asked for, and the fields that go with it (each refusal says which goes with what)."""
    refuse_unknown_arguments("status", args, STATUS_FIELDS, SubagentError)
    name, names, wait_seconds = args.get("name"), args.get("names"), args.get("wait_seconds")
    every, steps = args.get("all", False), args.get("steps", False)
    result_offset, steps_offset = args.get("result_offset"), args.get("steps_offset")
    if name is not None and names is not None:
        raise SubagentError("names: give name (one session) or names (several), not both")
    if every and names is None:
        raise SubagentError("all: goes with names (it waits for every one of several sessions)")
    if names is not None or (name is not None and wait_seconds is not None):
        if result_offset is not None:
            raise SubagentError("result_offset: pages one finished session's result; call status(name=..., "
                                "result_offset=N) without names or wait_seconds")
        return StatusRequest("wait", _names([name] if names is None else names), names is None,
                             _window(wait_seconds), _flag(every, "all"))
    if wait_seconds is not None:
        raise SubagentError("wait_seconds: goes with name or names (the sessions to wait for)")
    if steps or steps_offset is not None:
        return _steps(name, steps, steps_offset, result_offset)
    if name is None:
        if result_offset is not None:
            raise SubagentError("result_offset: needs name (it pages one session's last result)")
        return StatusRequest("list")
    return StatusRequest("one", (session_name(name),), result_offset=_optional_offset(result_offset))


def _steps(name: Any, steps: Any, steps_offset: Any, result_offset: Any) -> StatusRequest:
    if name is None:
        raise SubagentError("steps: needs name (it pages one session's last turn)")
    if not steps:
        raise SubagentError("steps_offset: goes with steps=true")
    if result_offset is not None:
        raise SubagentError("result_offset: pages the result, steps the steps; ask for one at a time")
    return StatusRequest("steps", (session_name(name),), steps_offset=_offset(steps_offset, "steps_offset"))


def _names(names: Any) -> tuple[str, ...]:
    if not isinstance(names, (list, tuple)) or not names:
        raise SubagentError("names: must be a non-empty list of session names")
    if len(names) > MAX_NAMES:
        raise SubagentError(f"names: at most {MAX_NAMES} sessions (got {len(names)})")
    checked = tuple(session_name(n) for n in names)
    if len(set(checked)) != len(checked):
        raise SubagentError("names: must not name the same session twice")
    return checked


def _window(wait_seconds: Any) -> WaitWindow:
    if wait_seconds is not None and (isinstance(wait_seconds, bool) or not isinstance(wait_seconds, (int, float))
                                     or not math.isfinite(wait_seconds) or wait_seconds < 0):
        raise SubagentError(f"wait_seconds: must be a number of seconds >= 0 (got {wait_seconds!r})")
    return cap_wait(wait_seconds, default=0.0)


def _flag(value: Any, field_name: str) -> bool:
    if not isinstance(value, bool):
        raise SubagentError(f"{field_name}: must be true or false (got {value!r})")
    return value


def _offset(value: Any, field_name: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SubagentError(f"{field_name}: must be a whole number of characters >= 0 (got {value!r})")
    return value


def _optional_offset(value: Any) -> int | None:
    return None if value is None else _offset(value, "result_offset")


def model_name(value: Any) -> str | None:
    """claude's --model: an alias or id, never starting with '-' (it would read as a flag)."""
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(MODEL_RULE, value):
        raise SubagentError(f"model: must be a model alias or id ({MODEL_RULE}), not starting with '-' "
                            f"(got {value!r})")
    return value


def _bounds_of(args: Mapping[str, Any], settings: SubagentSettings) -> TurnBounds:
    return turn_bounds(settings, args.get("max_budget_usd"), args.get("max_turns"), args.get("timeout_minutes"))


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
    _prompt_path(path)
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


def _prompt_path(path: Any) -> str:
    if not isinstance(path, str) or not path:
        raise SubagentError("prompt_file: must be a non-empty path")
    if "\0" in path:
        raise SubagentError("prompt_file: must not contain NUL characters")
    if not os.path.isabs(path):
        raise SubagentError(f"prompt_file: {path!r} must be an absolute path")
    return path


CWD_MAX = 4096
EFFORTS = ("low", "medium", "high", "xhigh", "max")  # claude's --effort levels (2.1.328 --help)
TOOLS_MAX = 64  # entries in one tools/allowed_tools/disallowed_tools list
RULE_MAX = 500  # characters of one permission rule
_TOOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")
# A permission rule as claude's --allowedTools takes it: a tool name, optionally one (...) specifier without
# parentheses, NUL or control characters inside ("Bash(git *)", "Read(./src/**)", "WebFetch(domain:x.org)").
_RULE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}(?:\([^()\x00-\x1f\x7f]{1," + str(RULE_MAX) + r"}\))?")


def working_directory(value: Any, roots: tuple[Path, ...], default: Path) -> Path:
    """`cwd`: an absolute path to an existing directory the daemon's user can enter, inside one of `roots`
    (the daemon's --allowed-cwd-roots, resolved); its real path (claude keys its transcripts by that)."""
    if value is None:
        return default
    if not isinstance(value, str) or not value:
        raise SubagentError("cwd: must be a non-empty absolute path")
    if "\0" in value or len(value) > CWD_MAX:
        raise SubagentError(f"cwd: must be an absolute path of at most {CWD_MAX} characters, without NUL")
    if not os.path.isabs(value):
        raise SubagentError(f"cwd: {value!r} must be an absolute path")
    real = os.path.realpath(value)
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        raise SubagentError(f"cwd: {value} does not exist") from None
    except OSError as exc:
        raise SubagentError(f"cwd: cannot look at {value}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(mode):
        raise SubagentError(f"cwd: {value} is not a directory")
    if not os.access(real, os.X_OK):
        raise SubagentError(f"cwd: {value} cannot be entered by the daemon's user (permission denied)")
    if not within(real, roots):
        allowed = ", ".join(str(r) for r in roots)
        raise SubagentError(f"cwd: {value} is outside the directories sessions may run in ({allowed}; the "
                            "daemon's --allowed-cwd-roots)")
    return Path(real)


def tool_list(value: Any, field_name: str, rules: bool) -> tuple[str, ...] | None:
    """`tools` (built-in tool names: `rules` False) or `allowed_tools`/`disallowed_tools` (permission rules such
    as "Bash(git *)"); None when not given. Each entry becomes one argv element of claude's, so an entry that
    could read as a flag or split into two is refused."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > TOOLS_MAX:
        raise SubagentError(f"{field_name}: must be a list of at most {TOOLS_MAX} texts")
    pattern, rule = (_RULE, 'a tool name, optionally with one (specifier), e.g. "Bash(git *)"') if rules else (
        _TOOL_NAME, 'a tool name such as "Bash", "Read" or "default"')
    for entry in value:
        if not isinstance(entry, str) or not pattern.fullmatch(entry):
            raise SubagentError(f"{field_name}: each entry must be {rule} (got {entry!r})")
    if len(set(value)) != len(value):
        raise SubagentError(f"{field_name}: must not name the same entry twice")
    return tuple(value)


def effort_level(value: Any) -> str | None:
    if value is None:
        return None
    if value not in EFFORTS:
        raise SubagentError(f"effort: must be one of {', '.join(EFFORTS)} (got {value!r})")
    return str(value)


def claude_options(args: Mapping[str, Any]) -> ClaudeOptions:
    """The session's tool limits and effort as the caller gave them (None: not given)."""
    return ClaudeOptions(tool_list(args.get("tools"), "tools", rules=False),
                         tool_list(args.get("allowed_tools"), "allowed_tools", rules=True),
                         tool_list(args.get("disallowed_tools"), "disallowed_tools", rules=True),
                         effort_level(args.get("effort")))


def cwd_roots(configured: tuple[str, ...], workdir: Path) -> tuple[Path, ...]:
    """The daemon's --allowed-cwd-roots, resolved (each an existing directory; ValueError names a bad one);
    none configured: --workdir's tree."""
    roots = []
    for root in configured:
        real = Path(os.path.realpath(os.path.expanduser(root)))
        if not os.path.isabs(os.path.expanduser(root)) or not real.is_dir():
            raise ValueError(f"allowed_cwd_roots: {root!r} is not an absolute path to an existing directory")
        roots.append(real)
    return tuple(roots) or (workdir,)
