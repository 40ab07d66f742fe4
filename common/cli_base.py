"""One shape for the five command lines (hive-bash-daemon, hive-bash, hive-subagent-daemon, hive-subagent,
hive-todos): -h/--help, --version, an "Exit codes" section in every --help, and errors printed as one line,
never a traceback. For the operator clients also the daemon's address (found from the same variables the
units set), its token (read with the daemon's own 0600 check), --json, and exit codes that say what failed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar, overload

import click
from click.decorators import FC  # a command's function (or command), as click's decorators take it

if TYPE_CHECKING:  # imported where they are used: an operator command starts faster without them
    from common.config import ServerSettings
    from common.disk.state_dir import StateDir
    from common.protocol.client import ToolCallResult
    from common.serving.serve import Listener

S = TypeVar("S", bound="ServerSettings")

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 120}
EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 1, 2, 3
TASK_STATE_EXIT = {"timed_out": 124, "interrupted": 125, "killed": 137}  # as timeout(1), a restart, SIGKILL
WAIT_WORTH_SAYING = 2.0  # seconds: an operator waiting longer than this on a silent terminal is told why
CLIENT_EXIT_CODES = (
    (EXIT_REFUSED, "the daemon refused the call (unknown id or name, a bad value: the message says which)"),
    (EXIT_USAGE, "bad usage of the command line"),
    (EXIT_UNREACHABLE, "the daemon could not be reached, or answered with a protocol error"),
)
DAEMON_EXIT_CODES = (
    (0, "stopped by SIGTERM or Ctrl-C, after stopping what it ran"),
    (1, "could not start (the message says why: the port, the state directory, ...)"),
    (EXIT_USAGE, "bad usage, or a knob that cannot work (the message names it)"),
)


def package_version() -> str:
    try:
        return metadata.version("hive-daemons")
    except metadata.PackageNotFoundError:
        return "0"


def exit_codes_epilog(codes: Sequence[tuple[int | str, str]]) -> str:
    rows = "\n".join(f"  {str(code):<5}{meaning}" for code, meaning in codes)
    return f"\b\nExit codes:\n{rows}"


class _OneLineErrors:
    """An error click does not know (an OSError, a bug) ends the program with one line and exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            raise click.ClickException(f"{exc.strerror or exc}{where}") from None
        except Exception as exc:
            logging.getLogger(__name__).debug("the traceback of %r", exc, exc_info=True)  # --log-level debug shows it
            raise click.ClickException(f"unexpected {type(exc).__name__}: {exc}") from None


class OneLineCommand(_OneLineErrors, click.Command):
    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """A subcommand without an epilog of its own shows its program's (the exit codes)."""
        if self.epilog is None and ctx.parent is not None and ctx.parent.command.epilog:
            self.epilog = ctx.parent.command.epilog
        super().format_epilog(ctx, formatter)


class OneLineGroup(_OneLineErrors, click.Group):
    command_class = OneLineCommand


@overload
def program(name: str, exit_codes: Sequence[tuple[int | str, str]], *, group: Literal[True], **kwargs: Any
            ) -> Callable[[Callable[..., Any]], click.Group]: ...


@overload
def program(name: str, exit_codes: Sequence[tuple[int | str, str]], *, group: Literal[False] = False,
            **kwargs: Any) -> Callable[[Callable[..., Any]], click.Command]: ...


def program(name: str, exit_codes: Sequence[tuple[int | str, str]], *, group: bool = False, **kwargs: Any
            ) -> Callable[[Callable[..., Any]], click.Command]:
    """A top-level click command (or group) in the shape every program here shares."""

    def decorate(fn: Callable[..., Any]) -> click.Command:
        fn = click.version_option(package_version(), "--version", prog_name=name)(fn)
        shape: dict[str, Any] = dict(name=name, context_settings=CONTEXT_SETTINGS,
                                     epilog=exit_codes_epilog(exit_codes), **kwargs)
        if group:
            return click.group(cls=OneLineGroup, **shape)(fn)
        return click.command(cls=OneLineCommand, **shape)(fn)

    return decorate


# ----- the daemons ---------------------------------------------------------------------------------------------


def claim_daemon_start(settings_type: type[S], options: dict[str, Any], name: str) -> tuple[S, StateDir, Listener]:
    """A daemon's settings from its command line and its logging, then every check that can refuse the start,
    the state directory's lock and the listening socket, in that order: a refused start has read, recovered
    or written nothing in the state directory. Returns (settings with the state directory as claimed, the
    claimed StateDir: keep it, it holds the lock; the listener)."""
    from common.config import settings_from_options
    from common.disk.state_dir import claim_state_dir, share_gid
    from common.event_log import configure as configure_logging
    from common.serving.serve import check_can_serve, listen

    settings = settings_from_options(settings_type, options)
    configure_logging(settings.log_level, settings.log_format)
    check_can_serve(settings)
    state = claim_state_dir(settings.state_dir, name, share_gid(settings.share_group))
    settings = dataclasses.replace(settings, state_dir=state.path)
    return settings, state, listen(settings)


# ----- the operator clients -----------------------------------------------------------------------------------


def default_url(prefix: str, port: int) -> str:
    """The daemon's URL from the variables its unit sets (`<PREFIX>_HOST`, `<PREFIX>_PORT`), else the default."""
    host = os.environ.get(f"{prefix}_HOST") or "127.0.0.1"
    if host in ("0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"  # listening everywhere includes loopback
    return f"http://{host}:{os.environ.get(f'{prefix}_PORT') or port}/mcp"


class DaemonClient:
    """The daemon's URL and token; `call` turns transport failures and refusals into exits with meaning."""

    def __init__(self, prog: str, url: str, token_file: Path | None, timeout: float):
        self.prog, self.url, self.timeout = prog, url, timeout
        self._said_waiting = False
        self.token = _read_token(token_file) if token_file is not None else None

    def call(self, tool: str, arguments: Mapping[str, object], *, as_json: bool = False, wait: float = 0.0
             ) -> ToolCallResult:
        """One tool call; exits 3 when the daemon cannot be reached and 1 when it refuses (the reason on stderr,
        or as {"error": ...} with --json). `arguments`: the tool's TypedDict where the command builds it so;
        a None value is an option not given, and is left out."""
        from common.protocol.client import McpClientError, call_tool

        self._say_waiting(wait)
        live = LiveLine() if wait >= WAIT_WORTH_SAYING and sys.stderr.isatty() else None
        try:
            result = call_tool(self.url, tool, {k: v for k, v in arguments.items() if v is not None},
                               token=self.token, timeout=self.timeout + wait, on_progress=live)
        except McpClientError as exc:
            fail(self.prog, str(exc), EXIT_UNREACHABLE)
        finally:
            if live is not None:
                live.clear()
        if result.is_error:
            if as_json:
                click.echo(json.dumps({"error": result.text.strip()}, indent=2))
                sys.exit(EXIT_REFUSED)
            fail(self.prog, result.text.strip(), EXIT_REFUSED)
        return result


    def _say_waiting(self, wait: float) -> None:
        """On a terminal, say once that a long wait is a wait (the answer itself comes when it ends)."""
        if wait >= WAIT_WORTH_SAYING and not self._said_waiting and sys.stderr.isatty():
            click.echo(f"{self.prog}: waiting up to {wait:g} s for the result (Ctrl-C stops waiting, not the task)",
                       err=True)
            self._said_waiting = True


class LiveLine:
    """One line of stderr rewritten in place with a waiting call's latest progress (a terminal only)."""

    def __init__(self) -> None:
        self.shown = False

    def __call__(self, message: str) -> None:
        width = shutil.get_terminal_size((80, 24)).columns - 1
        sys.stderr.write("\r\x1b[K" + message[:width])
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _read_token(path: Path) -> str:
    from common.protocol.http_guard import TokenFileError, read_token_file

    try:
        return read_token_file(path)
    except TokenFileError as exc:
        raise click.UsageError(f"--token-file: {exc}") from None


def task_exit_code(data: Mapping[str, Any]) -> int:
    """The exit code that says how a task ended (0 while it runs): its own, or TASK_STATE_EXIT's."""
    state = data.get("status")
    if state == "done":
        code = data.get("exit_code")
        return code if isinstance(code, int) and 0 <= code <= 255 else 1
    return TASK_STATE_EXIT.get(state, 0) if isinstance(state, str) else 0


def fail(prog: str, message: str, code: int) -> NoReturn:
    """Print `prog: message` as one line on stderr and exit with `code`."""
    click.echo(f"{prog}: {' '.join(message.split())}", err=True)
    sys.exit(code)


def client_options(prefix: str, port: int) -> Callable[[FC], FC]:
    """--url, --token-file and --timeout of an operator client, each with its variable."""

    def decorate(fn: FC) -> FC:
        fn = click.option("--timeout", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
                          help="Seconds to wait for the daemon's answer, on top of any wait the command asks for.")(fn)
        fn = click.option("--token-file", envvar=f"{prefix}_TOKEN_FILE",
                          show_envvar=True, type=click.Path(path_type=Path),
                          help="File (0600) holding the daemon's bearer token, if it requires one.")(fn)
        return click.option("--url", envvar=f"{prefix}_URL",
                            show_envvar=True, default=lambda: default_url(prefix, port),
                            show_default=f"http://127.0.0.1:{port}/mcp, or from {prefix}_HOST and {prefix}_PORT",
                            help="The daemon's MCP endpoint.")(fn)

    return decorate


json_option = click.option("--json", "as_json", is_flag=True, help="Print the exact structured result as JSON.")


def frame_options(once_help: str) -> Callable[[FC], FC]:
    """The options of both `top` commands: --once, --interval, --json (common/live_table.py draws the frames)."""

    def decorate(command: FC) -> FC:
        command = json_option(command)
        command = click.option("--interval", type=click.FloatRange(min=0.2), default=2.0, show_default=True,
                               help="Seconds between frames.")(command)
        return click.option("--once", is_flag=True, help=once_help)(command)

    return decorate


def show(result: ToolCallResult, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result.data, indent=2, sort_keys=True))
    else:
        click.echo(result.text, nl=not result.text.endswith("\n"))
