"""`hive-subagent-daemon` (serve the four tools) and `hive-subagent` (the operator's commands).

Operator commands talk to the running daemon through one MCP call each (common.mcp_client), except `list`
and `log`, which read claude's transcripts from disk and so work with the daemon down.

Exit codes: 0 done; 1 the daemon refused or the turn failed (the message says why); 2 bad usage (click);
3 the daemon could not be reached or answered with a protocol error.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import click

from common.config import SubagentSettings, click_options, settings_from_options

EXIT_REFUSED = 1
EXIT_UNREACHABLE = 3
DEFAULT_URL = "http://127.0.0.1:7712/mcp"
SERVER_NAME = "subagent"  # the MCP server name: tools land as mcp__subagent__<tool>


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("hive-daemons")
    except Exception:
        return "0"


# ---------------------------------------------------------------------------------------------- the daemon


@click.command(name="hive-subagent-daemon")
@click_options(SubagentSettings, "HIVE_SUBAGENT")
def daemon_main(**options: Any) -> None:
    """Serve the subagent MCP tools (start, continue, interrupt, status) over streamable HTTP."""
    settings = settings_from_options(SubagentSettings, options)
    level = logging.getLevelName(settings.log_level.upper())
    if not isinstance(level, int):
        raise click.BadParameter("must be one of debug, info, warning, error", param_hint="--log-level")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from common.todos.delivery import TodoDelivery
    from common.mcp_http import McpApp
    from common.serve import serve_daemon
    from hivesubagent.engine import SOURCE, SubagentEngine
    from hivesubagent.tools import build_registry

    state_dir = Path(settings.state_dir)
    try:
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:  # e.g. the path runs through a regular file, or a read-only mount
        raise click.ClickException(f"--state-dir {state_dir}: cannot be used: {exc.strerror or exc}") from None
    todos = TodoDelivery(SOURCE, state_dir, settings.agent_socket)
    try:
        engine = SubagentEngine(settings, todos)
    except ValueError as exc:
        todos.close()
        raise click.ClickException(str(exc)) from None
    if shutil.which(settings.claude_bin, path=engine.env.get("PATH")) is None:
        todos.close()
        raise click.ClickException(f"--claude-bin: {settings.claude_bin!r} is not an executable (nor found on PATH)")
    app = McpApp(build_registry(engine), SERVER_NAME, _version(), settings)

    def on_stop() -> None:
        engine.shutdown()  # interrupts running turns; their todos are queued before we flush
        todos.flush(5.0)
        todos.close()

    serve_daemon(app, settings, on_stop=on_stop)


# ---------------------------------------------------------------------------------------------- the operator CLI


class Ctx:
    def __init__(self, url: str, token_file: Path | None, timeout: float):
        self.url, self.token_file, self.timeout = url, token_file, timeout

    def token(self) -> str | None:
        if self.token_file is None:
            return None
        try:
            return self.token_file.read_text().strip()
        except OSError as exc:
            raise click.UsageError(f"--token-file: cannot read {self.token_file}: {exc.strerror}") from None


def json_option(fn: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Print the structured result as JSON.")(fn)


@click.group(name="hive-subagent")
@click.option("--url", envvar="HIVE_SUBAGENT_URL", show_envvar=True, default=DEFAULT_URL, show_default=True,
              help="The daemon's MCP endpoint.")
@click.option("--token-file", envvar="HIVE_SUBAGENT_TOKEN_FILE", show_envvar=True, type=click.Path(path_type=Path),
              default=None, help="File holding the daemon's bearer token.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=60.0, show_default=True, help="Seconds to wait for the daemon.")
@click.pass_context
def main(ctx: click.Context, url: str, token_file: Path | None, timeout: float) -> None:
    """Operate nested claude sessions run by hive-subagent-daemon."""
    ctx.obj = Ctx(url, token_file, timeout)


def _call(ctx: Ctx, tool: str, arguments: dict[str, Any], as_json: bool) -> None:
    from common.mcp_client import McpClientError, call_tool

    try:
        result = call_tool(ctx.url, tool, arguments, token=ctx.token(), timeout=ctx.timeout)
    except McpClientError as exc:
        click.echo(f"hive-subagent: {exc}", err=True)
        sys.exit(EXIT_UNREACHABLE)
    if as_json:
        click.echo(json.dumps(result.data if result.data else {"error": result.text} if result.is_error else {}, indent=2))
    else:
        click.echo(result.text, err=result.is_error)
    if result.is_error:
        sys.exit(EXIT_REFUSED)


@main.command()
@click.argument("name")
@click.argument("prompt_file", type=click.Path(path_type=Path))
@click.option("--model", default=None, help="claude --model for the subagent.")
@click.option("--trigger", default=None, help="The first turn's prompt (default: 'carry out your instructions').")
@click.option("--max-budget-usd", type=click.FloatRange(min=0, min_open=True), default=None,
              help="US dollars this turn may spend (claude's --max-budget-usd); default: the daemon's.")
@json_option
@click.pass_obj
def start(ctx: Ctx, name: str, prompt_file: Path, model: str | None, trigger: str | None, max_budget_usd: float | None,
          as_json: bool) -> None:
    """Start a fresh session NAME with the instructions in PROMPT_FILE."""
    args: dict[str, Any] = {"name": name, "prompt_file": os.path.abspath(prompt_file)}
    if model is not None:
        args["model"] = model
    if trigger is not None:
        args["trigger"] = trigger
    if max_budget_usd is not None:
        args["max_budget_usd"] = max_budget_usd
    _call(ctx, "start", args, as_json)


@main.command(name="continue")
@click.argument("name")
@click.argument("prompt")
@click.option("--model", default=None, help="claude --model for this turn.")
@click.option("--max-budget-usd", type=click.FloatRange(min=0, min_open=True), default=None,
              help="US dollars this turn may spend (claude's --max-budget-usd); default: the daemon's.")
@json_option
@click.pass_obj
def continue_(ctx: Ctx, name: str, prompt: str, model: str | None, max_budget_usd: float | None, as_json: bool) -> None:
    """Give session NAME a new turn with PROMPT ('-' reads it from stdin)."""
    if prompt == "-":
        prompt = sys.stdin.read()
    args: dict[str, Any] = {"name": name, "prompt": prompt}
    if model is not None:
        args["model"] = model
    if max_budget_usd is not None:
        args["max_budget_usd"] = max_budget_usd
    _call(ctx, "continue", args, as_json)


@main.command()
@click.argument("name")
@click.option("--force", is_flag=True, help="SIGKILL instead of SIGINT.")
@json_option
@click.pass_obj
def interrupt(ctx: Ctx, name: str, force: bool, as_json: bool) -> None:
    """Stop the running turn of session NAME."""
    _call(ctx, "interrupt", {"name": name, "force": force}, as_json)


@main.command()
@click.argument("name", required=False)
@click.option("--result-offset", type=click.IntRange(min=0), default=None,
              help="Show a page of the last turn's result text from this character (needs NAME).")
@json_option
@click.pass_obj
def status(ctx: Ctx, name: str | None, result_offset: int | None, as_json: bool) -> None:
    """Show session NAME (its progress while it runs), or every session the daemon knows."""
    args: dict[str, Any] = {} if name is None else {"name": name}
    if result_offset is not None:
        args["result_offset"] = result_offset
    _call(ctx, "status", args, as_json)


def store_options(fn: Callable) -> Callable:
    """Where the transcripts are: the same workdir and environment the daemon gives claude."""
    fn = click.option("--extra-env", multiple=True, envvar="HIVE_SUBAGENT_EXTRA_ENV", show_envvar=True,
                      help="KEY=VALUE the daemon adds to claude's environment (HOME, CLAUDE_CONFIG_DIR matter here).")(fn)
    fn = click.option("--workdir", type=click.Path(path_type=Path), default=Path("."), envvar="HIVE_SUBAGENT_WORKDIR",
                      show_envvar=True, show_default=True, help="The daemon's working directory for sessions.")(fn)
    return fn


def _store(workdir: Path, extra_env: tuple[str, ...]):
    from hivesubagent.claude import child_env, parse_extra_env
    from hivesubagent.sessions import SessionStore

    try:
        extra = parse_extra_env(extra_env)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--extra-env") from None
    if not workdir.is_dir():
        raise click.BadParameter(f"{workdir} is not a directory", param_hint="--workdir")
    return SessionStore(workdir.resolve(), child_env(os.environ, extra, workdir.resolve()))


@main.command(name="list")
@store_options
@click.option("--archived", is_flag=True, help="Include archived transcripts.")
@json_option
def list_(workdir: Path, extra_env: tuple[str, ...], archived: bool, as_json: bool) -> None:
    """List the sessions on disk (read from claude's transcripts; works without the daemon)."""
    store = _store(workdir, extra_env)
    rows = []
    for t in store.list(include_archived=archived):
        last = t.last_turn
        rows.append({
            "name": t.name, "session_id": t.session_id, "archived": t.archived, "turns": t.turns, "model": t.model,
            "total_cost_usd": t.cost_usd, "last_outcome": None if last is None else last.outcome, "transcript": str(t.path),
        })
    if as_json:
        click.echo(json.dumps({"project_dir": str(store.project_dir), "sessions": rows}, indent=2))
        return
    from hivesubagent.tools import kv

    click.echo(kv(sessions=len(rows), project_dir=str(store.project_dir)))
    for r in rows:
        click.echo(kv(name=r["name"] or "-", session_id=r["session_id"], turns=r["turns"], last_outcome=r["last_outcome"],
                      total_cost_usd=r["total_cost_usd"], archived=r["archived"]))


@main.command()
@click.argument("name")
@store_options
@click.option("--last", type=click.IntRange(min=1), default=None, help="Only the last N turns.")
@json_option
def log(name: str, workdir: Path, extra_env: tuple[str, ...], last: int | None, as_json: bool) -> None:
    """Show session NAME's transcript as readable turns (read from disk)."""
    from common.names import InvalidName, check_name
    from hivesubagent.transcript_log import as_data, read_turns, render

    try:
        check_name(name, "name")
    except InvalidName as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None
    store = _store(workdir, extra_env)
    paths = store.find_all(name)
    if not paths:
        click.echo(f"hive-subagent: no session named {name!r} in {store.project_dir}", err=True)
        sys.exit(EXIT_REFUSED)
    turns = read_turns(paths[0])
    if last is not None:
        turns = turns[-last:]
    if as_json:
        click.echo(json.dumps({"name": name, "transcript": str(paths[0]), "turns": as_data(turns)}, indent=2))
    else:
        click.echo(f"session {name} ({paths[0]})\n")
        click.echo(render(turns))


if __name__ == "__main__":
    main()
