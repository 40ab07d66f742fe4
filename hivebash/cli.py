"""Command lines: `hive-bash-daemon` serves the tools; `hive-bash` is the operator's client for a running daemon.

`hive-bash` talks to the daemon through its MCP endpoint (one POST per call, common.protocol.client), prints the
same readable text the model reads, or the exact data with --json. Its exit codes are in EXIT_CODES.
"""

from __future__ import annotations

import gc
import logging
import os
import resource
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from common.cli_base import (
    CLIENT_EXIT_CODES,
    DAEMON_EXIT_CODES,
    DaemonClient,
    claim_daemon_start,
    client_options,
    frame_options,
    json_option,
    package_version,
    program,
    show,
    task_exit_code,
)
from common.config import BashSettings, click_options
from hivebash.cli_interactive import attach_cmd, send_cmd
from hivebash.cli_tail import KeptCopier, status_gap

if TYPE_CHECKING:  # the tools' argument types only (importing hivebash.tools would load the engine)
    from hivebash.tools import KillArgs, ListArgs, RunArgs, StatusArgs

DEFAULT_PORT = 7711
FOLLOW_STEP = 1.0  # seconds: `tail -f` waits this long on the daemon's condition between reads
EXIT_CODES = (
    (0, "the call worked (for `run`: the task still runs, or finished with exit code 0)"),
    ("N", "`run --wait` / `tail -f` / `wait` / `send` / `attach` saw the task finish: its own exit code"),
    (124, "the task timed out"),
    (125, "the task was interrupted (a daemon restart)"),
    (137, "the task was killed"),
    *CLIENT_EXIT_CODES,
)


# ----- the daemon ---------------------------------------------------------------------------------------------


@program("hive-bash-daemon", DAEMON_EXIT_CODES)
@click_options(BashSettings, "HIVE_BASH")
def daemon_main(**options: Any) -> None:
    """Serve the background-shell tools (run, status, kill, list) over MCP streamable HTTP at /mcp."""
    # No collections through start-up's imports and recovery (thousands of objects, no garbage worth a pass):
    # serving starts with one collection and turns the collector back on (common/serving/serve.py, _tune_gc).
    gc.disable()
    from common.protocol.transport import McpApp
    from common.serving.daemon_main import run_daemon
    from common.todos.delivery import TodoDelivery
    from hivebash.engine import Engine
    from hivebash.metrics import bash_metrics
    from hivebash.processes.reaper import become_subreaper
    from hivebash.tools import build_registry

    # Refusals, the lock and the port before anything on disk is read or recovered; `state` holds the lock.
    settings, state, listener = claim_daemon_start(BashSettings, options, "bash")
    _raise_fd_limit()
    # Before any task starts: orphans of tasks (setsid escapees, & children of a finished shell) must be
    # re-parented to us, not to init, so a kill can find and stop them.
    subreaper = become_subreaper()
    try:
        todos = TodoDelivery("bash", settings.state_dir, settings.agent_socket)
        engine = Engine(settings, todos, subreaper=subreaper)
    except OSError as exc:  # e.g. the path runs through a regular file, or a read-only mount
        raise click.ClickException(f"--state-dir {settings.state_dir}: cannot be used: {exc.strerror or exc}") from None
    metrics = bash_metrics(engine, todos) if settings.metrics == "on" else None
    app = McpApp(build_registry(engine), "bash", package_version(), settings, metrics)
    run_daemon(app, settings, engine, todos, listener)


def _raise_fd_limit() -> None:
    """Each running task holds two descriptors (its leader's pidfd and a wake-up eventfd); systemd's default
    soft limit (1024) would cap max-running near 500. Raise the soft limit to the hard one (capped)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    target = min(target, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            logging.getLogger(__name__).warning("cannot raise the open-files limit: %s", exc)


# ----- the operator's client ----------------------------------------------------------------------------------


@program("hive-bash", EXIT_CODES, group=True)
@client_options("HIVE_BASH", DEFAULT_PORT)
@click.pass_context
def main(ctx: click.Context, url: str, token_file: Path | None, timeout: float) -> None:
    """Talk to a running hive-bash-daemon: run commands in the background, watch and stop them.

    Options go before the command of `run`: everything after CMD's first word is the command's own
    (`hive-bash run --wait 30 --json make test`, not `hive-bash run make test --json`).
    """
    ctx.obj = DaemonClient("hive-bash", url, token_file, timeout)


@main.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--name", help="Task id of your choice ([a-z0-9-], 1-63 characters).")
@click.option("--timeout", "timeout_secs", type=click.IntRange(min=1), help="Kill the task after this many seconds.")
@click.option("--wait", "wait_seconds", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds to wait for the result (the daemon caps it at 30); the exit code is then the task's.")
@click.option("--cwd", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Working directory of the task [default: this shell's].")
@click.option("--stdin", type=click.Choice(["null", "pipe", "tty"]), default=None,
              help="The task's input: null (/dev/null, the default), pipe or tty "
                   "(then `send` and `attach` type into it).")
@json_option
@click.pass_obj
def run_cmd(client: DaemonClient, cmd: tuple[str, ...], name: str | None, timeout_secs: int | None,
            wait_seconds: float, cwd: Path | None, stdin: str | None, as_json: bool) -> None:
    """Run CMD (joined with spaces, as `bash -c`) in the background. Quote it to keep shell syntax for the task.

    Options come before CMD: everything from CMD's first word on is the command's, options included
    (`hive-bash run --wait 30 --json make test` prints JSON; `hive-bash run make test --json` runs
    `make test --json`).
    """
    args: RunArgs = {"cmd": " ".join(cmd), "wait_seconds": wait_seconds, "cwd": str((cwd or Path.cwd()).absolute())}
    if name is not None:
        args["name"] = name
    if timeout_secs is not None:
        args["timeout_secs"] = timeout_secs
    if stdin is not None:
        args["stdin"] = stdin
    result = client.call("run", args, as_json=as_json, wait=wait_seconds)
    show(result, as_json)
    sys.exit(task_exit_code(result.data))


@main.command("status")
@click.argument("task_id", metavar="ID")
@click.option("--wait", "wait_seconds", type=click.FloatRange(min=0), help="Wait up to this many seconds for the end.")
@click.option("--wait-for", metavar="REGEX", help="With --wait: also stop waiting at a new output line matching REGEX.")
@click.option("--grep", metavar="REGEX", help="Show the matching lines of the whole output, numbered.")
@click.option("--context", type=click.IntRange(0, 10), help="With --grep: lines shown around each match.")
@click.option("--from-line", type=click.IntRange(min=1), help="Show numbered lines from this one (the first is 1).")
@click.option("--max-lines", type=click.IntRange(1, 500), help="With --from-line: how many lines [default: 40].")
@click.option("--stream", type=click.Choice(["stdout", "stderr"]), help="Only this stream.")
@click.option("--new-only", is_flag=True, default=None,
              help="Only what the agent has not been shown yet (your look does not change that).")
@json_option
@click.pass_obj
def status_cmd(client: DaemonClient, task_id: str, wait_seconds: float | None, as_json: bool, **view: Any) -> None:
    """Show a task's status and output tails, or a view of it.

    \b
    hive-bash status build --grep 'error|FAILED' --context 2
    hive-bash status build --from-line 5000 --max-lines 40
    hive-bash status build --stream stderr

    Your look is the operator's: it never clears the agent's todo of the task."""
    args = {"id": task_id, "wait_seconds": wait_seconds} | view
    show(client.call("status", args, as_json=as_json, wait=wait_seconds or 0), as_json)


@main.command("wait")
@click.argument("task_ids", metavar="ID...", nargs=-1, required=True)
@click.option("--timeout", "wait_seconds", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="Seconds to wait (the daemon caps one wait at 30; longer waits are made of several).")
@click.option("--wait-for", metavar="REGEX", help="Also stop at a new output line matching REGEX.")
@json_option
@click.pass_obj
def wait_cmd(client: DaemonClient, task_ids: tuple[str, ...], wait_seconds: float, wait_for: str | None,
             as_json: bool) -> None:
    """Wait for the first of the tasks to end; one line per task.

    With --wait-for, a new output line matching REGEX ends the wait too.

    Exits with the first ended task's code (as `run --wait`), 0 if none ended in time."""
    deadline = time.monotonic() + wait_seconds
    while True:
        step = min(max(0.0, deadline - time.monotonic()), 30.0)
        args: StatusArgs = {"ids": list(task_ids), "wait_seconds": step}
        if wait_for is not None:
            args["wait_for"] = wait_for
        result = client.call("status", args, as_json=as_json, wait=step)
        data = result.data
        if data.get("ended") or (data.get("wait_for") or {}).get("matched") or deadline - time.monotonic() <= 0:
            break
        if data.get("wait", {}).get("skipped"):  # the daemon had no wait slot: do not spin
            time.sleep(FOLLOW_STEP)
    show(result, as_json)
    ended = [t for t in data.get("tasks", []) if t.get("id") in set(data.get("ended") or ())]
    sys.exit(task_exit_code(ended[0]) if ended else 0)


main.add_command(send_cmd)
main.add_command(attach_cmd)


@main.command("kill")
@click.argument("task_id", metavar="ID")
@click.option("--force", is_flag=True, help="SIGKILL instead of SIGINT.")
@json_option
@click.pass_obj
def kill_cmd(client: DaemonClient, task_id: str, force: bool, as_json: bool) -> None:
    """Stop a task (SIGINT to its group; --force: SIGKILL). Returns at once."""
    args: KillArgs = {"id": task_id, "force": force}
    show(client.call("kill", args, as_json=as_json), as_json)


@main.command("list")
@click.option("--state", type=click.Choice(["pending", "running", "done", "timed_out", "killed", "interrupted"]))
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@json_option
@click.pass_obj
def list_cmd(client: DaemonClient, state: str | None, limit: int, as_json: bool) -> None:
    """List tasks, newest first."""
    args: ListArgs = {"limit": limit}
    if state is not None:
        args["state"] = state
    show(client.call("list", args, as_json=as_json), as_json)


@main.command("top")
@frame_options("Print one frame (measured over half a second) and exit.")
@click.pass_obj
def top_cmd(client: DaemonClient, once: bool, interval: float, as_json: bool) -> None:
    """A live table of the running tasks: age, CPU and memory of their processes, output size and growth,
    `input` when a process waits reading the task's stdin; and the calls the daemon is answering now.

    \b
    hive-bash top               refresh every 2 s until Ctrl-C
    hive-bash top --once        one frame, for a script or a ticket
    hive-bash top --once --json the same figures as one JSON object (--json alone: one a line)"""
    from common.live_table import run_frames
    from hivebash.cli_top import TopSampler, render_frame

    run_frames(TopSampler(client).sample, render_frame, once=once, as_json=as_json, interval=interval, echo=click.echo)


@main.command("tail")
@click.argument("task_id", metavar="ID")
@click.option("-f", "--follow", is_flag=True, help="Keep printing output until the task ends; exit with its code.")
@click.option("--stderr", "stream", flag_value="stderr", help="Show stderr instead of stdout.")
@click.option("--stdout", "stream", flag_value="stdout", default=True, hidden=True)
@click.option("-c", "--bytes", "count", type=click.IntRange(min=0), default=4096, show_default=True,
              help="Start with the last this many bytes.")
@click.pass_obj
def tail_cmd(client: DaemonClient, task_id: str, follow: bool, stream: str, count: int) -> None:
    """Print the end of a task's output file (read directly from the daemon's state directory).

    A middle dropped past --max-output-bytes is one marker line, never its NUL bytes."""
    first: StatusArgs = {"id": task_id}
    again: StatusArgs = {"id": task_id, "wait_seconds": FOLLOW_STEP}
    data = client.call("status", first).data
    path = Path(data[stream]["path"])
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            copier = KeptCopier(f.fileno(), sys.stdout.buffer, max(0, size - count),
                                lambda: status_gap(client.call("status", first).data, stream))
            copier.start(status_gap(data, stream))
            copier.copy()
            while follow and data.get("status") in ("pending", "running"):
                started = time.monotonic()
                data = client.call("status", again, wait=FOLLOW_STEP).data
                copier.copy()
                if data.get("wait", {}).get("skipped"):  # the daemon had no wait slot: do not spin
                    time.sleep(max(0.0, FOLLOW_STEP - (time.monotonic() - started)))
            copier.copy()
    except FileNotFoundError:
        raise click.ClickException(f"{path}: no such file (is the daemon's state directory on this machine?)") from None
    except PermissionError:
        raise click.ClickException(f"{path}: permission denied (the files are 0600, "
                                   "owned by the daemon's user)") from None
    sys.exit(task_exit_code(data) if follow else 0)
