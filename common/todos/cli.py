"""`hive-todos`: the reference sink of the harness socket (sink.py), and a client to look at it or poke it.

Operators run `serve` when there is no real harness (`scripts/run` does); `list` asks a socket what it holds,
`outbox` reads what a daemon has not delivered yet, `upsert`/`clear` send one request as a daemon would.
Its exit codes are in EXIT_CODES, in the shape every program here shares (common.cli_base).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click
from click.decorators import FC

from common.cli_base import EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE, fail, program
from common.humanize import human_age
from common.todos.outbox import JOURNAL_NAME, OUTBOX_DIRNAME, read_journal
from common.todos.sink import TodoBoard, serve_until_signalled, take_socket_path
from common.todos.wire import (
    OP_CLEAR,
    OP_LIST,
    OP_UPSERT,
    HarnessError,
    HarnessUnreachable,
    check_socket_path,
    exchange,
)

EXIT_ERROR = EXIT_REFUSED
EXIT_NO_OUTBOX = EXIT_UNREACHABLE  # `outbox`: nothing to read at that path, as for a socket nobody listens on
EXIT_CODES = (
    (0, "success (`outbox`: even when nothing waits)"),
    (EXIT_ERROR, "the other end answered with an error, or `serve` cannot take the socket path"),
    (EXIT_USAGE, "bad usage of the command line (no --socket given, a path too long)"),
    (EXIT_UNREACHABLE, "nothing listens on the socket (or no such file); `outbox`: no outbox at that path"),
)
LIST_REPLY_LIMIT = 256 * 1024 * 1024  # a list reply carries every todo's body; far above any real board
SEND_REPLY_LIMIT = 64 * 1024  # an upsert or clear is answered by a short acknowledgement

SOCKET_HELP = "The harness's Unix socket (at most 107 bytes as a path)."


def socket_option(command: FC) -> FC:
    return click.option(
        "--socket", "socket_path", type=click.Path(path_type=Path, dir_okay=False), envvar="HIVE_AGENT_SOCKET",
        show_envvar=True, help=SOCKET_HELP,
    )(command)


def _require_socket(socket_path: Path | None) -> Path:
    if socket_path is None:
        raise click.UsageError("--socket: required (or set HIVE_AGENT_SOCKET)")
    try:
        check_socket_path(socket_path)
    except ValueError as e:
        raise click.UsageError(str(e).replace("socket:", "--socket:", 1)) from None
    return socket_path


@program("hive-todos", EXIT_CODES, group=True)
def main() -> None:
    """Keyed todos of the hive daemons, seen from the harness's side of the socket.

    The bash and subagent daemons send each completion as a keyed todo to the harness's Unix socket
    (HIVE_AGENT_SOCKET): `todo.upsert` shows or replaces the todo of a key, `todo.clear` removes it. The wire
    is one JSON object per line each way; docs/todo-protocol.md describes every field.

    \b
    Without a real harness, run the reference sink and point the daemons at it:
      hive-todos serve --socket /tmp/hive/agent.sock &
      HIVE_AGENT_SOCKET=/tmp/hive/agent.sock hive-bash-daemon ...
      hive-todos list --socket /tmp/hive/agent.sock

    What a daemon could not deliver yet waits in its outbox: `hive-todos outbox /var/lib/hive-bash`.
    """


@main.command()
@socket_option
@click.option("--json", "as_json", is_flag=True, help="Print each change as one JSON object per line.")
def serve(socket_path: Path | None, as_json: bool) -> None:
    """Serve the socket as a harness would: keep the current todos, print each change as it happens.

    An upsert replaces the todo of its (source, key), a clear removes it, `todo.list` returns them all.
    The socket file is created 0600 (a stale one nobody listens on is replaced) and removed on exit.
    Stop with Ctrl-C or SIGTERM (exit 0). Todos live in memory only: the daemons resend what they have not
    had acknowledged, not what they already delivered.
    """
    path = _require_socket(socket_path)
    take_socket_path(path)
    serve_until_signalled(path, TodoBoard(as_json), as_json)


def _request(socket_path: Path, message: dict[str, Any], timeout: float, reply_limit: int) -> dict[str, Any]:
    """One exchange for the client commands: exit 3 when unreachable, 1 on an error or malformed reply."""
    try:
        reply = exchange(socket_path, message, timeout, reply_limit=reply_limit)
    except HarnessUnreachable as e:
        fail("hive-todos", f"{e}; is the harness (or `hive-todos serve --socket {socket_path}`) running?",
             EXIT_UNREACHABLE)
    except HarnessError as e:
        fail("hive-todos", str(e), EXIT_ERROR)
    if not reply["ok"]:
        fail("hive-todos", f"the socket answered an error: {reply.get('error')}", EXIT_ERROR)
    return reply


TIMEOUT_OPTION = click.option("--timeout", type=click.FloatRange(min=0.001), default=5.0, show_default=True,
                              help="Seconds to wait for the reply.")


@main.command(name="list")
@socket_option
@click.option("--json", "as_json", is_flag=True, help="Print the todos as a JSON array (every field, bodies too).")
@TIMEOUT_OPTION
def list_(socket_path: Path | None, as_json: bool, timeout: float) -> None:
    """Show the todos a socket holds now (asks it `todo.list`; the reference sink answers it).

    The table shows source, key, age and summary, oldest change first; --json gives every field.
    """
    path = _require_socket(socket_path)
    reply = _request(path, {"op": OP_LIST}, timeout, LIST_REPLY_LIMIT)
    todos = reply.get("todos")
    if not isinstance(todos, list) or not all(isinstance(t, dict) for t in todos):
        fail("hive-todos", "the reply has no 'todos' list (does this harness implement todo.list?)", EXIT_ERROR)
    if as_json:
        click.echo(json.dumps(todos, ensure_ascii=False, indent=2))
        return
    if not todos:
        click.echo("no todos")
        return
    _print_table(("SOURCE", "KEY", "AGE", "SUMMARY"), [
        (str(t.get("source", "")), str(t.get("key", "")), _age_of(t.get("updated_at")), str(t.get("summary", "")))
        for t in todos])


def _age_of(updated_at: Any) -> str:
    return human_age(time.time() - updated_at) if isinstance(updated_at, (int, float)) else "-"


def _print_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """Columns padded to their widest cell; the last one (a summary) is left as long as it is."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1])


SOURCE_OPTION = click.option("--source", required=True, help="The producer, e.g. bash or subagent.")
KEY_OPTION = click.option("--key", required=True, help="The todo's key (a task id or session name).")


@main.command()
@socket_option
@SOURCE_OPTION
@KEY_OPTION
@click.option("--summary", required=True, help="One line: what happened.")
@click.option("--body", default="", help="The text the agent reads ('-' reads it from stdin).")
@click.option("--data", "data_json", default="{}", help="A JSON object of structured fields.")
@TIMEOUT_OPTION
def upsert(socket_path: Path | None, source: str, key: str, summary: str, body: str, data_json: str,
           timeout: float) -> None:
    """Send one todo.upsert, as a daemon would: for trying out a harness's end of the socket."""
    path = _require_socket(socket_path)
    try:
        data = json.loads(data_json)
    except ValueError as e:
        raise click.UsageError(f"--data: must be a JSON object ({e})") from None
    if not isinstance(data, dict):
        raise click.UsageError("--data: must be a JSON object")
    if body == "-":
        body = sys.stdin.read()
    _request(path, {"op": OP_UPSERT, "key": key, "source": source, "summary": summary, "body": body, "data": data},
             timeout, SEND_REPLY_LIMIT)
    click.echo("ok")


@main.command()
@socket_option
@SOURCE_OPTION
@KEY_OPTION
@TIMEOUT_OPTION
def clear(socket_path: Path | None, source: str, key: str, timeout: float) -> None:
    """Send one todo.clear, as a daemon would: for trying out a harness's end of the socket."""
    path = _require_socket(socket_path)
    _request(path, {"op": OP_CLEAR, "key": key, "source": source}, timeout, SEND_REPLY_LIMIT)
    click.echo("ok")


@main.command()
@click.argument("state_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--source", help="Only this producer (bash, subagent); default: every source in STATE_DIR.")
@click.option("--json", "as_json", is_flag=True, help="Print the entries as a JSON array (messages in full).")
def outbox(state_dir: Path, source: str | None, as_json: bool) -> None:
    """Show the todos a daemon holds undelivered: its outbox under STATE_DIR (e.g. /var/lib/hive-bash).

    Read-only, so safe beside the running daemon. The table shows source, key, operation and summary, by source,
    oldest change first. Exits 0 even when nothing waits, 3 when STATE_DIR has no outbox.
    """
    root = state_dir / OUTBOX_DIRNAME
    sources = [source] if source else sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    journals = [(s, root / s / JOURNAL_NAME) for s in sources if (root / s).is_dir()]
    if not journals:
        fail("hive-todos", f"no outbox under {root}", EXIT_NO_OUTBOX)
    # Sequence numbers count per source: by source, then oldest change first.
    entries = [(s, e) for s, journal in journals for e in sorted(read_journal(journal).values(), key=lambda e: e.seq)]
    if as_json:
        click.echo(json.dumps([{"source": s, "seq": e.seq, "key": e.key, "message": e.message} for s, e in entries],
                              ensure_ascii=False, indent=2))
        return
    if not entries:
        click.echo("nothing waits in the outbox")
        return
    _print_table(("SOURCE", "KEY", "OP", "SUMMARY"), [
        (s, e.key, str(e.message.get("op", "?")).removeprefix("todo."), str(e.message.get("summary", "")))
        for s, e in entries])


if __name__ == "__main__":
    main()
