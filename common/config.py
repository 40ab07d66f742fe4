"""Every knob of both daemons in one typed place, each with its unit, default and the reason for the default.

A knob is a dataclass field declared with `knob(...)`. The CLI turns each into a click option with an
environment variable (`<PREFIX>_<NAME>`, e.g. HIVE_BASH_MAX_RUNNING), so systemd units and operators set
the same names. Settings objects are frozen: read once at start-up, passed down explicitly.
"""

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, ClassVar, Literal, TypeVar, get_args, get_origin

import click
from click.decorators import FC  # a command's function (or command), as click's decorators take it

from common.disk.durability import MODES as FSYNC_MODES


def knob(default: Any, unit: str, help: str, env: str | None = None, multiple: bool = False) -> Any:
    """Declare one knob: its default, its unit ("seconds", "bytes", "count", ...) and a help text that says why."""
    meta = {"unit": unit, "help": help, "env": env, "multiple": multiple}
    if isinstance(default, (list, tuple)):
        return field(default_factory=lambda: tuple(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ServerSettings:
    """What every daemon's HTTP side needs."""

    host: str = knob("127.0.0.1", "address", "Address to listen on. Loopback by default; any other needs --token-file.")
    port: int = knob(0, "port", "TCP port to listen on (0 picks a free one; the chosen URL is logged and written to "
                                "--ready-file).")
    state_dir: Path = knob(Path("harness"), "path", "State directory (task files, todo outbox); created 0700.")
    agent_socket: Path | None = knob(
        None, "path", "The harness's Unix socket for keyed todos. Unset: todos wait in the outbox.",
        env="HIVE_AGENT_SOCKET"
    )
    token_file: Path | None = knob(None, "path", "File (0600) holding a bearer token every request must carry.")
    allowed_hosts: tuple[str, ...] = knob(
        (), "host names", "Extra Host header names to accept besides loopback names (DNS-rebinding protection).",
        multiple=True
    )
    allowed_origins: tuple[str, ...] = knob(
        (), "origins",
        "Extra Origin values to accept (e.g. https://app.example); the daemon's own URL origin is always "
        "accepted, other ports of this machine are not.", multiple=True
    )
    allow_uid: tuple[str, ...] = knob(
        (), "uids or user names",
        "Local users allowed to call besides the daemon's own uid (a connection from any other "
        "uid on this machine gets 403). Repeat for more; the NixOS module fills it with the agent's user.",
        multiple=True
    )
    metrics_allow_uid: tuple[str, ...] = knob(
        (), "uids or user names",
        "Local users that may read GET /metrics (and /healthz) and nothing else, e.g. a Prometheus scraper's user: "
        "any other path answers them 403. Repeat for more.", multiple=True
    )
    threads: int = knob(32, "count", "waitress request threads. Inline waits hold one each (up to 30 s), "
                                     "so keep well above max-inline-waits.")
    max_inline_waits: int = knob(
        24, "count",
        "Concurrent inline waits allowed; past that a wait answers at once, so kill/status never queue behind waits."
    )
    connection_limit: int = knob(200, "count",
                                 "Open connections waitress accepts at once (Claude Code reconnects every turn).")
    channel_timeout: int = knob(120, "seconds", "Idle connection timeout; well above the 30 s wait cap.")
    share_group: str | None = knob(
        None, "group", "A group (name or gid) that may read the state directory and the task files in it "
        "(directories 2750, records and outputs 0640), e.g. the agent's group when the daemons run as another "
        "user. Unset: the daemon's user alone (0700, 0600)."
    )
    body_timeout: float = knob(
        5.0, "seconds", "A request (headers and body) must arrive within this long of its first byte, or the "
        "connection is closed: a stalled upload costs one connection for seconds, not the idle timeout."
    )
    first_request_timeout: float = knob(
        5.0, "seconds", "A new connection must send its first whole request within this long, or it is closed "
        "(408 if it had begun one): connections that never send a byte cannot fill --connection-limit. A "
        "connection whose request is being answered is never idle, however long the answer takes."
    )
    max_body_bytes: int = knob(
        1024 * 1024, "bytes", "Largest request body accepted. A tools/call up to 8 times larger is answered with a "
        "tool error naming its largest argument and how the tool takes a file instead (Tool.file_route); 413 above "
        "that, or for any other method."
    )
    # Bodies over max_body_bytes but within this many times it are still read (waitress spools a body past its
    # 512 KiB inbuf_overflow to a temporary file, so memory stays bounded): an agent's 2 MB `cmd` then gets a
    # tool error it can act on, where a plain 413 tells it nothing and it retries the same call. Above it: 413
    # before the body.
    OVERSIZED_CALL_FACTOR: ClassVar[int] = 8
    session_ttl: float = knob(3600.0, "seconds",
                              "Idle handshake-era sessions expire after this (Claude Code never sends DELETE).")
    max_sessions: int = knob(1000, "count", "Most handshake-era sessions kept; the least recently used goes first.")
    ready_file: Path | None = knob(None, "path",
                                   "Once listening, write {url, pid} as JSON here (tests and scripts wait on it).")
    log_level: Literal["debug", "info", "warning", "error"] = knob("info", "level", "How much the daemon logs.")
    mcp_tasks: Literal["on", "off"] = knob(
        "on", "switch", "Serve the MCP tasks extension (io.modelcontextprotocol/tasks, protocol 2026-07-28): a call "
        "still at work when its wait ends answers a client that declared it with a task handle the client polls, "
        "and its end reaches the model through the client. off: every client gets today's answers, and ends "
        "arrive as todos alone."
    )
    log_format: Literal["text", "json"] = knob(
        "text", "format", "How log lines look on stderr (journald under systemd). text: time, level, logger, message, "
        "and a notable event's fields as key=value (event=task_end task=... outcome=... seconds=...). json: one "
        "object a line with the same fields, for log collectors. Neither holds commands, prompts, output or tokens."
    )
    metrics: Literal["on", "off"] = knob(
        "on", "switch", "Serve GET /metrics (the Prometheus text format) behind the same checks as /mcp: the "
        "listening address, Host, the caller's uid, the bearer token. off: 404."
    )

    @property
    def body_ceiling_bytes(self) -> int:
        """The largest body read at all (waitress's max_request_body_size): OVERSIZED_CALL_FACTOR x max_body_bytes."""
        return self.max_body_bytes * self.OVERSIZED_CALL_FACTOR

    def validate(self) -> None:
        """Refuse settings that cannot work, with a message naming the knob."""
        if self.max_inline_waits >= self.threads:
            raise click.BadParameter(
                f"must be below --threads ({self.threads}) so kill/status are always served",
                param_hint="--max-inline-waits"
            )
        if not 0 <= self.port <= 65535:
            raise click.BadParameter("must be 0..65535", param_hint="--port")
        # With no room for a session (or a TTL that is already over) every initialize mints an id that is
        # gone before the client's next request: each handshake-era client then fails with 404 (seen with the
        # TypeScript SDK and --max-sessions 0).
        if self.max_sessions < 1:
            raise click.BadParameter("must be at least 1, or no handshake-era client can connect",
                                     param_hint="--max-sessions")
        if not self.session_ttl > 0:
            raise click.BadParameter("must be > 0 seconds, or no handshake-era client can connect",
                                     param_hint="--session-ttl")
        if self.connection_limit < 1:
            raise click.BadParameter("must be at least 1, or no client can connect", param_hint="--connection-limit")
        if not self.channel_timeout > 0:
            raise click.BadParameter("must be > 0 seconds, or every connection is dropped at once",
                                     param_hint="--channel-timeout")
        if not self.body_timeout > 0:
            raise click.BadParameter("must be > 0 seconds, or no request can arrive", param_hint="--body-timeout")
        if not self.first_request_timeout > 0:
            raise click.BadParameter("must be > 0 seconds, or no request can arrive",
                                     param_hint="--first-request-timeout")


MIN_OUTPUT_LIMIT = 1 << 20  # bytes: the smallest --max-output-bytes
STATE_SHARE = re.compile(r"(\d+(?:\.\d+)?)%")  # --max-state-bytes as a share of the state filesystem


def quota_error(text: str) -> str | None:
    """Why `text` is no --max-state-bytes (a byte count, 0: none, or a share of the filesystem: `25%`)."""
    share = STATE_SHARE.fullmatch(text.strip())
    if share:
        return None if 0 < float(share.group(1)) <= 100 else "a share must be above 0% and at most 100%"
    if text.strip().isdigit():
        return None
    return "must be a byte count (0: no quota) or a share of the state filesystem such as 25%"


@dataclass(frozen=True)
class BashSettings(ServerSettings):
    port: int = knob(7711, "port", "TCP port for the bash MCP server (URL http://HOST:PORT/mcp).")
    max_running: int = knob(
        32, "count",
        "Tasks running at once; the rest wait as pending in submission order. Agent tasks mostly wait on I/O."
    )
    kill_grace: float = knob(
        2.0, "seconds", "After SIGTERM (timeout, leftovers of a killed group), wait this long before SIGKILL."
    )
    tail_bytes: int = knob(4096, "bytes", "How much of the end of stdout and of stderr a status shows.")
    keep_tasks: int = knob(1000, "count", "Finished tasks kept (with their files); older ones are pruned first.")
    max_output_bytes: int = knob(
        1 << 30, "bytes", "Most bytes on disk of one task's stdout (and as many of its stderr). Past it the first "
        "bytes (an eighth, at most 64 MiB) and the newest are kept and the middle is freed while the task runs on; "
        "views say what was dropped. Where the filesystem cannot free a range, the task is stopped (killed). 0: no "
        "limit."
    )
    max_state_bytes: str = knob(
        "25%", "bytes or %", "Most bytes on disk of all task output files together: a byte count, or a share of "
        "the state filesystem's size (25%: a quarter of it). Past it the oldest finished tasks' outputs are "
        "emptied (their records stay, saying so), then the middles of the largest running ones are freed. 0: no "
        "quota."
    )
    keep_days: float = knob(7.0, "days", "Finished tasks older than this are pruned, files included.")
    fsync: str = knob(
        "batched", "mode", "When task records reach the disk. batched: in one background flush every --fsync-window "
        "(a crash of the daemon loses nothing; a power loss, at most that window). always: fsync each record "
        "before the call goes on (a disk write on the path of every call that changes a task)."
    )
    fsync_window: float = knob(
        0.02, "seconds", "With --fsync batched: records written within this long share one flush (group commit)."
    )

    def validate(self) -> None:
        super().validate()
        if self.fsync not in FSYNC_MODES:
            raise click.BadParameter(f"must be one of {', '.join(FSYNC_MODES)}", param_hint="--fsync")
        if not 0 <= self.fsync_window <= 10:
            raise click.BadParameter("must be between 0 and 10 seconds", param_hint="--fsync-window")
        if self.max_running < 1:
            raise click.BadParameter("must be at least 1, or every task stays pending forever",
                                     param_hint="--max-running")
        if self.kill_grace < 0:
            raise click.BadParameter("must be >= 0 seconds", param_hint="--kill-grace")
        if 0 < self.max_output_bytes < MIN_OUTPUT_LIMIT:
            raise click.BadParameter("must be 0 (no limit) or at least 1 MiB (1048576): below it the kept head "
                                     "and tail would be a few lines", param_hint="--max-output-bytes")
        quota_rule = quota_error(self.max_state_bytes)
        if quota_rule:
            raise click.BadParameter(quota_rule, param_hint="--max-state-bytes")
        if self.keep_tasks < 1:
            raise click.BadParameter("must be at least 1, or a task is pruned before its result can be read",
                                     param_hint="--keep-tasks")
        if not self.keep_days > 0:
            raise click.BadParameter("must be > 0 days, or a task is pruned before its result can be read",
                                     param_hint="--keep-days")


@dataclass(frozen=True)
class SubagentSettings(ServerSettings):
    port: int = knob(7712, "port", "TCP port for the subagent MCP server (URL http://HOST:PORT/mcp).")
    claude_bin: str = knob("claude", "command", "The claude CLI to run (a name on PATH or a path).")
    workdir: Path = knob(Path("."), "path",
                         "Working directory the sessions run in (claude keys its transcripts by it).")
    extra_env: tuple[str, ...] = knob(
        (), "KEY=VALUE", "Extra environment for claude (e.g. IS_SANDBOX=1 when running as root).", multiple=True
    )
    allowed_cwd_roots: tuple[str, ...] = knob(
        (), "path", "A directory tree a start's cwd may name (repeatable). Unset: --workdir's tree only.",
        multiple=True
    )
    max_running: int = knob(4, "count",
                            "Sessions running at once; a start past this is refused (each is a full claude).")
    turn_timeout: float = knob(
        3600.0, "seconds", "Default wall-clock limit of one turn (a start/continue may pass its own timeout_minutes): "
        "then SIGINT, SIGKILL after --kill-grace, and the turn ends timed_out. 0: none."
    )
    max_turns: int = knob(
        200, "turns", "Default --max-turns of every turn: claude's own cap on the model calls of one turn (a "
        "start/continue may pass its own); past it the turn ends max_turns. 0: none."
    )
    kill_grace: float = knob(5.0, "seconds", "After a soft interrupt or turn timeout, wait this long before SIGKILL.")
    stall_minutes: float = knob(
        10.0, "minutes", "A running turn whose claude has written no stream event for this long is shown as stalled "
        "(status, and a todo update naming its last event). 0: never."
    )
    stall_action: Literal["report", "interrupt"] = knob(
        "report", "action", "What a stall does besides being shown: report (nothing is stopped) or interrupt (SIGINT "
        "to the turn, as interrupt(name) would)."
    )
    confirm_wait: float = knob(
        0.2, "seconds",
        "start/continue wait at most this long for claude's init line or an early exit before answering "
        "'running' (a start must answer within 300 ms of the spawn; claude's init takes ~0.25 s)."
    )
    result_chars: int = knob(
        1500, "characters", "How much of a turn's result text status and the completion todo show (at most 3 KiB; "
        "status(name, result_offset) pages through the rest)."
    )
    max_budget_usd: float | None = knob(
        None, "US dollars", "Default --max-budget-usd of every turn (a start/continue may pass its own). Unset: none."
    )

    def validate(self) -> None:
        super().validate()
        if self.max_running < 1:
            raise click.BadParameter("must be at least 1, or every start is refused", param_hint="--max-running")
        if self.max_budget_usd is not None and not self.max_budget_usd > 0:
            raise click.BadParameter("must be > 0 US dollars (leave it unset for no budget)",
                                     param_hint="--max-budget-usd")
        for value, hint in ((self.kill_grace, "--kill-grace"), (self.confirm_wait, "--confirm-wait"),
                            (self.turn_timeout, "--turn-timeout"), (self.stall_minutes, "--stall-minutes")):
            if value < 0:
                raise click.BadParameter("must be >= 0 seconds", param_hint=hint)


S = TypeVar("S", bound=ServerSettings)


def knob_fields(settings_cls: type) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(settings_cls) if "unit" in f.metadata]


def env_name(f: dataclasses.Field[Any], prefix: str) -> str:
    return f.metadata["env"] or f"{prefix}_{f.name.upper()}"


# A knob's command-line type follows its declared type; a declared type not listed here fails at import.
_CLICK_TYPES: dict[Any, Any] = {
    int: click.IntRange(min=0),
    float: float,
    str: str,
    Path: click.Path(path_type=Path),
}


def click_type(f: dataclasses.Field[Any]) -> Any:
    """The click type of a knob, from its declared type."""
    declared = f.type
    if isinstance(declared, UnionType):  # `X | None`: an optional knob of type X
        declared = next(t for t in get_args(declared) if t is not NoneType)
    if get_origin(declared) is Literal:
        return click.Choice(get_args(declared), case_sensitive=False)
    if get_origin(declared) is tuple:  # a repeatable knob: tuple[X, ...]
        declared = get_args(declared)[0]
    try:
        return _CLICK_TYPES[declared]
    except KeyError:
        raise TypeError(f"knob {f.name}: no command-line type for {f.type!r}") from None


def click_options(settings_cls: type, prefix: str) -> Callable[[FC], FC]:
    """Decorate a click command with one option per knob of `settings_cls` (env var `<prefix>_<NAME>`)."""

    def decorate(command: FC) -> FC:
        for f in reversed(knob_fields(settings_cls)):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            flag = "--" + f.name.replace("_", "-")
            unit = f.metadata["unit"]
            extra: dict[str, Any] = {}
            if f.metadata["multiple"]:
                extra["multiple"] = True
            command = click.option(
                flag,
                f.name,
                type=click_type(f),
                default=default,
                show_default=default not in (None, ()),
                envvar=env_name(f, prefix),
                show_envvar=True,
                help=f"{f.metadata['help']} [{unit}]",
                **extra,
            )(command)
        return command

    return decorate


def settings_from_options(settings_cls: type[S], options: dict[str, Any]) -> S:
    """Build the frozen settings object from click's parsed options (unknown keys are left to the caller)."""
    names = {f.name for f in knob_fields(settings_cls)}
    values: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in options.items() if k in names}
    settings = settings_cls(**values)
    settings.validate()
    return settings
