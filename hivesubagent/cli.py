"""`hive-subagent-daemon` (serve the four tools) and `hive-subagent` (the operator's commands).

Operator commands talk to the running daemon through one MCP call each (common.protocol.client), except `list`,
`log` and `diff`, which read claude's transcripts (and a worktree, with git) from disk and so work with the
daemon down: they find the daemon's working directory in its state directory (hivesubagent.transcripts.where),
and each session's own directory in its place book (hivesubagent.places.book).
"""

from __future__ import annotations

import gc
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from common.cli_base import (
    CLIENT_EXIT_CODES,
    DAEMON_EXIT_CODES,
    EXIT_REFUSED,
    DaemonClient,
    claim_daemon_start,
    client_options,
    fail,
    json_option,
    package_version,
    program,
    show,
)
from common.config import SubagentSettings, click_options
from hivesubagent.cli_watch import top_command
from hivesubagent.transcripts import where

if TYPE_CHECKING:  # the tools' argument types only (importing hivesubagent.tools would load the engine)
    from hivesubagent.place_schemas import OptionArgs
    from hivesubagent.places.finder import SessionPlaces
    from hivesubagent.tools import BoundsArgs, ContinueArgs, InterruptArgs, StartArgs, SubagentStatusArgs

_log = logging.getLogger(__name__)  # (`log` is the command below)

DEFAULT_PORT = 7712
SERVER_NAME = "subagent"  # the MCP server name: tools land as mcp__subagent__<tool>
EXIT_CODES = ((0, "the call worked"), *CLIENT_EXIT_CODES)


# ---------------------------------------------------------------------------------------------- the daemon


@program("hive-subagent-daemon", DAEMON_EXIT_CODES)
@click_options(SubagentSettings, "HIVE_SUBAGENT")
def daemon_main(**options: Any) -> None:
    """Serve the subagent MCP tools (start, continue, interrupt, status) over streamable HTTP."""
    # No collections through start-up's imports and recovery (thousands of objects, no garbage worth a pass):
    # serving starts with one collection and turns the collector back on (common/serving/serve.py, _tune_gc).
    gc.disable()
    from common.protocol.transport import McpApp
    from common.serving.daemon_main import run_daemon
    from common.todos.delivery import TodoDelivery
    from hivesubagent.engine import SOURCE, SubagentEngine
    from hivesubagent.metrics import subagent_metrics
    from hivesubagent.tools import build_registry

    # Refusals, the lock and the port before the outbox is read back; `state` holds the lock.
    settings, state, listener = claim_daemon_start(SubagentSettings, options, SERVER_NAME)
    todos = TodoDelivery(SOURCE, state.path, settings.agent_socket)
    try:
        engine = SubagentEngine(settings, todos)
    except ValueError as exc:
        todos.close()
        raise click.ClickException(str(exc)) from None
    if shutil.which(settings.claude_bin, path=engine.env.get("PATH")) is None:
        todos.close()
        raise click.ClickException(f"--claude-bin: {settings.claude_bin!r} is not an executable (nor found on PATH)")
    try:
        where.write_record(state.path, engine.workdir, engine.env)
    except OSError as exc:  # a full disk must not stop the daemon: only the operator's CLI needs the record
        _log.warning("cannot write %s (%s): `hive-subagent list` and `log` look in the current directory until "
                    "a restart writes it", state.path / where.RECORD_NAME, exc.strerror or exc)
    metrics = subagent_metrics(engine, todos) if settings.metrics == "on" else None
    app = McpApp(build_registry(engine), SERVER_NAME, package_version(), settings, metrics)
    run_daemon(app, settings, engine, todos, listener)


# ---------------------------------------------------------------------------------------------- the operator CLI


@program("hive-subagent", EXIT_CODES, group=True)
@client_options("HIVE_SUBAGENT", DEFAULT_PORT)
@click.pass_context
def main(ctx: click.Context, url: str, token_file: Path | None, timeout: float) -> None:
    """Operate nested claude sessions run by hive-subagent-daemon.

    start, continue, interrupt and status call the daemon; list and log read claude's transcripts from disk
    (in the daemon's working directory, found in its state directory), diff a session's git worktree, and all
    three work with the daemon down.
    """
    ctx.obj = DaemonClient("hive-subagent", url, token_file, timeout)


def _call(client: DaemonClient, tool: str, arguments: Mapping[str, object], as_json: bool) -> None:
    show(client.call(tool, arguments, as_json=as_json), as_json)


def turn_options(command: Callable) -> Callable:
    """The caps of one turn, as start and continue take them (each defaults to the daemon's)."""
    for option in reversed((
        click.option("--max-budget-usd", type=click.FloatRange(min=0, min_open=True), default=None,
                     help="US dollars this turn may spend (claude's --max-budget-usd); default: the daemon's."),
        click.option("--max-turns", type=click.IntRange(min=1), default=None,
                     help="Model calls this turn may make (claude's --max-turns); default: the daemon's."),
        click.option("--timeout-minutes", type=click.FloatRange(min=0, min_open=True), default=None,
                     help="Minutes this turn may run before it is stopped; default: the daemon's --turn-timeout."),
    )):
        command = option(command)
    return command


def tool_options(command: Callable) -> Callable:
    """The tool limits and effort, as start and continue take them (continue: for its turn only)."""
    for option in reversed((
        click.option("--tools", "tools", multiple=True, metavar="TOOL",
                     help="A built-in tool the subagent has (repeat; claude's --tools). Default: all."),
        click.option("--no-tools", is_flag=True, help="No built-in tool at all (claude's --tools \"\")."),
        click.option("--allowed-tool", "allowed_tools", multiple=True, metavar="RULE",
                     help="A permission rule allowed, e.g. 'Bash(git *)' (repeat; claude's --allowedTools)."),
        click.option("--disallowed-tool", "disallowed_tools", multiple=True, metavar="RULE",
                     help="A permission rule denied, e.g. 'Bash(git push *)' (repeat; claude's --disallowedTools)."),
        click.option("--effort", type=click.Choice(["low", "medium", "high", "xhigh", "max"]), default=None,
                     help="claude's --effort."),
    )):
        command = option(command)
    return command


def _tool_args(tools: tuple[str, ...], no_tools: bool, allowed_tools: tuple[str, ...],
               disallowed_tools: tuple[str, ...], effort: str | None) -> OptionArgs:
    """The tool limits given on the command line (tool_options); the daemon checks each."""
    if no_tools and tools:
        raise click.BadParameter("give --tools or --no-tools, not both", param_hint="--no-tools")
    given: OptionArgs = {}
    if tools or no_tools:
        given["tools"] = list(tools)
    if allowed_tools:
        given["allowed_tools"] = list(allowed_tools)
    if disallowed_tools:
        given["disallowed_tools"] = list(disallowed_tools)
    if effort is not None:
        given["effort"] = effort
    return given


def _turn_caps(max_budget_usd: float | None, max_turns: int | None, timeout_minutes: float | None) -> BoundsArgs:
    """The caps given on the command line (turn_options); the others stay the daemon's."""
    caps: BoundsArgs = {}
    if max_budget_usd is not None:
        caps["max_budget_usd"] = max_budget_usd
    if max_turns is not None:
        caps["max_turns"] = max_turns
    if timeout_minutes is not None:
        caps["timeout_minutes"] = timeout_minutes
    return caps


@main.command()
@click.argument("name")
@click.argument("prompt_file", type=click.Path(path_type=Path))
@click.option("--model", default=None, help="claude --model for the subagent.")
@click.option("--trigger", default=None, help="The first turn's prompt (default: 'carry out your instructions').")
@click.option("--cwd", type=click.Path(path_type=Path), default=None,
              help="The directory the session works in (default: the daemon's --workdir).")
@click.option("--worktree", is_flag=True, help="A git worktree of its own (branch hive/NAME) of cwd's repository.")
@tool_options
@turn_options
@json_option
@click.pass_obj
def start(ctx: DaemonClient, name: str, prompt_file: Path, model: str | None, trigger: str | None, as_json: bool,
          cwd: Path | None, worktree: bool, max_budget_usd: float | None, max_turns: int | None,
          timeout_minutes: float | None, **tool_limits: Any) -> None:
    """Start a fresh session NAME with the instructions in PROMPT_FILE."""
    args: StartArgs = {"name": name, "prompt_file": os.path.abspath(prompt_file),
                       **_turn_caps(max_budget_usd, max_turns, timeout_minutes), **_tool_args(**tool_limits)}
    if cwd is not None:
        args["cwd"] = os.path.abspath(cwd)
    if worktree:
        args["worktree"] = True
    if model is not None:
        args["model"] = model
    if trigger is not None:
        args["trigger"] = trigger
    _call(ctx, "start", args, as_json)


@main.command(name="continue")
@click.argument("name")
@click.argument("prompt")
@click.option("--model", default=None, help="claude --model for this turn.")
@tool_options
@turn_options
@json_option
@click.pass_obj
def continue_(ctx: DaemonClient, name: str, prompt: str, model: str | None, as_json: bool,
              max_budget_usd: float | None, max_turns: int | None, timeout_minutes: float | None,
              **tool_limits: Any) -> None:
    """Give session NAME a new turn with PROMPT ('-' reads it from stdin), where it runs (its cwd or worktree)."""
    if prompt == "-":
        prompt = sys.stdin.read()
    args: ContinueArgs = {"name": name, "prompt": prompt, **_turn_caps(max_budget_usd, max_turns, timeout_minutes),
                          **_tool_args(**tool_limits)}
    if model is not None:
        args["model"] = model
    _call(ctx, "continue", args, as_json)


@main.command()
@click.argument("name")
@click.option("--force", is_flag=True, help="SIGKILL instead of SIGINT.")
@json_option
@click.pass_obj
def interrupt(ctx: DaemonClient, name: str, force: bool, as_json: bool) -> None:
    """Stop the running turn of session NAME."""
    args: InterruptArgs = {"name": name, "force": force}
    _call(ctx, "interrupt", args, as_json)


@main.command()
@click.argument("names", nargs=-1)
@click.option("--result-offset", type=click.IntRange(min=0), default=None,
              help="Show a page of the last turn's result text from this character (one NAME).")
@click.option("--wait", "wait_seconds", type=click.FloatRange(min=0), default=None,
              help="Wait up to this many seconds (at most 30) for the turn, or the first of several, to end.")
@click.option("--all", "want_all", is_flag=True, help="With several NAMEs and --wait: wait until every one has ended.")
@json_option
@click.pass_obj
def status(ctx: DaemonClient, names: tuple[str, ...], result_offset: int | None, wait_seconds: float | None,
           want_all: bool, as_json: bool) -> None:
    """Show session NAME (its progress while it runs), several NAMEs a line each, or every session the daemon
    knows."""
    args: SubagentStatusArgs = {}
    if len(names) == 1:
        args["name"] = names[0]
    elif names:
        args["names"] = list(names)
    if result_offset is not None:
        args["result_offset"] = result_offset
    if wait_seconds is not None:
        args["wait_seconds"] = wait_seconds
    if want_all:
        args["all"] = True
    show(ctx.call("status", args, as_json=as_json, wait=min(wait_seconds or 0, 30)), as_json)


def store_options(fn: Callable) -> Callable:
    """Where the transcripts are: the daemon's working directory and claude's environment, as the daemon
    recorded them in its state directory, unless --workdir says otherwise."""
    fn = click.option("--extra-env", multiple=True, envvar="HIVE_SUBAGENT_EXTRA_ENV", show_envvar=True,
                      help="With --workdir: KEY=VALUE the daemon adds to claude's environment (HOME, "
                           "CLAUDE_CONFIG_DIR matter here).")(fn)
    fn = click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False), envvar="HIVE_SUBAGENT_STATE_DIR",
                      show_envvar=True, help=f"The daemon's state directory, where it records its working directory "
                      f"[default: {where.DEPLOYED_STATE_DIR}, else ./{where.TRY_OUT_STATE_DIR}].")(fn)
    fn = click.option("--workdir", type=click.Path(path_type=Path), envvar="HIVE_SUBAGENT_WORKDIR", show_envvar=True,
                      help="The sessions' working directory [default: the daemon's, from its state directory; "
                           "else this one].")(fn)
    return fn


def _store(workdir: Path | None, state_dir: Path | None, extra_env: tuple[str, ...]) -> SessionPlaces:
    """The daemon's sessions: its --workdir's store, and each recorded session's own directory (its place book)."""
    from hivesubagent.places.book import PlaceBook
    from hivesubagent.places.finder import SessionPlaces
    from hivesubagent.places.worktrees import Worktrees
    from hivesubagent.transcripts.sessions import SessionStore
    from hivesubagent.turns.claude import child_env, parse_extra_env

    try:
        extra = parse_extra_env(extra_env)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--extra-env") from None
    env: dict[str, str] = dict(os.environ)
    if workdir is None:
        found = where.read_record([state_dir] if state_dir else [where.DEPLOYED_STATE_DIR, where.TRY_OUT_STATE_DIR])
        if found is not None:
            workdir, placing, record = found
            env, state_dir = where.env_as_daemon(os.environ, placing), record.parent
        else:
            workdir = Path(".")
            looked = state_dir or f"{where.DEPLOYED_STATE_DIR} or ./{where.TRY_OUT_STATE_DIR}"
            click.echo(f"hive-subagent: no daemon record in {looked}; reading the sessions of this directory", err=True)
    if not workdir.is_dir():
        raise click.BadParameter(f"{workdir} is not a directory", param_hint="--workdir")
    store = SessionStore(workdir.resolve(), child_env(env, extra, workdir.resolve()))
    state = (state_dir or where.TRY_OUT_STATE_DIR).absolute()
    scratch = Path(tempfile.gettempdir())  # a diff's temporary index (the state directory may not be ours)
    return SessionPlaces(store, PlaceBook(state, own=False), Worktrees(state / "worktrees", store.env, scratch))


@main.command(name="list")
@store_options
@click.option("--archived", is_flag=True, help="Include archived transcripts.")
@json_option
def list_(workdir: Path | None, state_dir: Path | None, extra_env: tuple[str, ...], archived: bool,
          as_json: bool) -> None:
    """List the sessions on disk (read from claude's transcripts; works without the daemon)."""
    places = _store(workdir, state_dir, extra_env)
    store = places.main
    rows = []
    for cwd in dict.fromkeys([store.workdir, *(p.cwd for p in places.book.all().values())]):
        for t in places.store(cwd).list(include_archived=archived):
            last = t.last_turn
            rows.append({
                "name": t.name, "session_id": t.session_id, "archived": t.archived, "turns": t.turns,
                "model": t.model, "total_cost_usd": t.cost_usd, "last_outcome": None if last is None else last.outcome,
                "transcript": str(t.path), "cwd": str(cwd),
            })
    if as_json:
        click.echo(json.dumps({"project_dir": str(store.project_dir), "sessions": rows}, indent=2))
        return
    from hivesubagent.answers.texts import kv

    click.echo(kv(sessions=len(rows), project_dir=str(store.project_dir)))
    for r in rows:
        click.echo(kv(name=r["name"] or "-", session_id=r["session_id"], turns=r["turns"],
                      last_outcome=r["last_outcome"], total_cost_usd=r["total_cost_usd"], archived=r["archived"],
                      **({} if r["cwd"] == str(store.workdir) else {"cwd": r["cwd"]})))


@main.command()
@click.argument("name")
@store_options
@click.option("--last", type=click.IntRange(min=1), default=None, help="Only the last N turns.")
@click.option("-f", "--follow", is_flag=True, help="Then print each step as claude writes it, until the turn ends.")
@json_option
@click.pass_obj
def log(client: DaemonClient, name: str, workdir: Path | None, state_dir: Path | None, extra_env: tuple[str, ...],
        last: int | None, follow: bool, as_json: bool) -> None:
    """Show session NAME's transcript as readable turns (read from disk); -f follows its running turn (the
    daemon says when it ends)."""
    from common.names import InvalidName, check_name
    from hivesubagent.cli_watch import show_log

    try:
        check_name(name, "name")
    except InvalidName as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None
    show_log(_store(workdir, state_dir, extra_env).store_of(name), name, last, as_json, follow, client)


@main.command()
@click.argument("name")
@store_options
@click.option("--stat", "stat_only", is_flag=True, help="Only the commits and the diff stat.")
@json_option
def diff(name: str, workdir: Path | None, state_dir: Path | None, extra_env: tuple[str, ...], stat_only: bool,
         as_json: bool) -> None:
    """Show what session NAME's worktree holds against its base: the whole diff, committed or not, new files
    included (read with git from disk; works without the daemon). Bring it back with git merge hive/NAME."""
    from common.names import InvalidName, check_name
    from hivesubagent.answers.place_texts import worktree_lines
    from hivesubagent.places.git import GitError

    try:
        check_name(name, "name")
    except InvalidName as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None
    places = _store(workdir, state_dir, extra_env)
    tree = places.place(name).worktree
    if tree is None:
        fail("hive-subagent", f"session {name!r} has no worktree (it was started without worktree=true, or the "
             f"daemon's record in {places.book.path} does not name it)", EXIT_REFUSED)
    stat = places.worktrees.stat(tree)
    if as_json or stat_only:
        click.echo(json.dumps(stat, indent=2) if as_json else "\n".join(worktree_lines(stat, name)))
        return
    try:
        click.echo("\n".join(worktree_lines(stat, name)) + "\n")
        click.echo(places.worktrees.diff(tree), nl=False)
    except GitError as exc:
        fail("hive-subagent", str(exc), EXIT_REFUSED)


if __name__ == "__main__":
    main()


main.add_command(top_command)
