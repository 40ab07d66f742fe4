"""`hive-loose-ends`: the reference sink of the harness socket, and a client to look at it or poke it.

`serve` is a complete, small implementation of the harness's end of docs/harness-protocol.md: it keeps the
current todos in memory (an upsert replaces, a clear removes), prints every change as it happens, and answers
`todo.list` so that `list` can show them. Operators run it when there is no real harness (`scripts/run` does),
tests run it as the real socket, and harness authors can read it as the reference.

Exit codes: 0 success; 1 the other end answered with an error, or `serve` cannot take the socket path;
2 usage errors and an unreachable socket (nothing listening, no such file, no --socket given).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import socketserver
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

from common.loose_ends import (
    MAX_LINE_BYTES,
    OP_CLEAR,
    OP_LIST,
    OP_UPSERT,
    OUTBOX_DIRNAME,
    HarnessError,
    HarnessUnreachable,
    check_socket_path,
    exchange,
)
from common.outbox import JOURNAL_NAME, read_journal
from common.waiting import Doorbell

EXIT_OK, EXIT_ERROR, EXIT_UNREACHABLE = 0, 1, 2
EXIT_NO_OUTBOX = 2  # `outbox`: nothing to read at that path, as for a socket nobody listens on
LIST_REPLY_LIMIT = 256 * 1024 * 1024  # a list reply carries every todo's body; far above any real board
CONNECTION_IDLE_TIMEOUT = 30.0  # seconds a connection may sit silent before the sink drops it
BODY_LINES_SHOWN = 10


# ---------------------------------------------------------------------------------------------------- the board


class RequestError(ValueError):
    """A request broke the protocol; the message names the field and the rule and goes back as the error."""


def _text(request: dict[str, Any], field: str, non_empty: bool) -> str:
    value = request.get(field)
    if not isinstance(value, str) or (non_empty and not value):
        raise RequestError(f"{field}: must be a {'non-empty ' if non_empty else ''}string")
    return value


class TodoBoard:
    """The current todos by (source, key), and the printed log of their changes, under one lock so the log's
    order is the order in which the changes were applied."""

    def __init__(self, as_json: bool):
        self.as_json = as_json
        self.quiet = False
        self._lock = threading.Lock()
        self._todos: dict[tuple[str, str], dict[str, Any]] = {}

    def handle(self, raw: bytes) -> dict[str, Any]:
        """One request line in, one reply object out; never raises for bad input."""
        try:
            request = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            return {"ok": False, "error": f"request: not a JSON line ({e})"}
        if not isinstance(request, dict):
            return {"ok": False, "error": "request: must be a JSON object"}
        try:
            return self._dispatch(request)
        except RequestError as e:
            return {"ok": False, "error": str(e)}

    def _dispatch(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == OP_LIST:
            with self._lock:
                return {"ok": True, "todos": list(self._todos.values())}
        if op not in (OP_UPSERT, OP_CLEAR):
            raise RequestError(f"op: must be one of {OP_UPSERT}, {OP_CLEAR}, {OP_LIST}; got {op!r}")
        source, key = _text(request, "source", True), _text(request, "key", True)
        if op == OP_CLEAR:
            with self._lock:
                removed = self._todos.pop((source, key), None) is not None
                self._print({"event": "clear", "source": source, "key": key, "removed": removed})
            return {"ok": True}
        data = request.get("data", {})
        if not isinstance(data, dict):
            raise RequestError("data: must be a JSON object")
        todo = {"source": source, "key": key, "summary": _text(request, "summary", False),
                "body": _text(request, "body", False), "data": data, "updated_at": time.time()}
        with self._lock:
            self._todos.pop((source, key), None)
            self._todos[(source, key)] = todo  # newest last, as `list` shows them
            self._print({"event": "upsert", **todo})
        return {"ok": True}

    def _print(self, event: dict[str, Any]) -> None:
        """Print one change; a closed stdout (`serve | head`) stops the printing, never the serving."""
        if self.quiet:
            return
        try:
            self._echo(event)
        except OSError:
            self.quiet = True

    def _echo(self, event: dict[str, Any]) -> None:
        if self.as_json:
            click.echo(json.dumps(event, ensure_ascii=False))
            return
        when = time.strftime("%H:%M:%S")
        who = f"{event['source']}/{event['key']}"
        if event["event"] == "clear":
            click.echo(f"{when} clear  {who}" + ("" if event["removed"] else "  (was not listed)"))
            return
        click.echo(f"{when} upsert {who}  {event['summary']}")
        lines = event["body"].splitlines()
        for line in lines[:BODY_LINES_SHOWN]:
            click.echo(f"    {line}")
        if len(lines) > BODY_LINES_SHOWN:
            click.echo(f"    ... ({len(lines) - BODY_LINES_SHOWN} more lines)")


# ---------------------------------------------------------------------------------------------------- the server


class _Handler(socketserver.StreamRequestHandler):
    """Any number of request lines per connection, each answered by one reply line, in order."""

    timeout = CONNECTION_IDLE_TIMEOUT

    def handle(self) -> None:
        board: TodoBoard = self.server.board  # type: ignore[attr-defined]
        while True:
            try:
                raw = self.rfile.readline(MAX_LINE_BYTES + 1)
            except OSError:
                return
            if not raw.endswith(b"\n"):
                if len(raw) > MAX_LINE_BYTES:
                    self._reply({"ok": False, "error": f"request: longer than {MAX_LINE_BYTES} bytes"})
                return  # end of stream (a partial last line is not a request)
            if raw.strip():
                self._reply(board.handle(raw))

    def _reply(self, reply: dict[str, Any]) -> None:
        try:
            self.wfile.write(json.dumps(reply, ensure_ascii=False).encode("utf-8") + b"\n")
            self.wfile.flush()
        except OSError:
            pass  # the client went away; nothing to tell it


class SinkServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, path: Path, board: TodoBoard):
        self.board = board
        old_umask = os.umask(0o177)  # the socket file is born 0600: no window where others may connect
        try:
            super().__init__(os.fspath(path), _Handler)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)


def _take_socket_path(path: Path) -> None:
    """Make `path` free to bind: remove a stale socket nobody listens on; refuse anything else."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return
    if not stat.S_ISSOCK(mode):
        raise click.ClickException(f"--socket: refusing to replace {path}: it exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(os.fspath(path))
    except OSError:
        path.unlink()  # a leftover of a sink or harness that died without cleaning up
        return
    finally:
        probe.close()
    raise click.ClickException(f"--socket: something is already listening on {path} (another sink or the harness)")


# ---------------------------------------------------------------------------------------------------- the commands

SOCKET_HELP = "The harness's Unix socket (at most 107 bytes as a path)."


def socket_option(command):
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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Keyed todos of the hive daemons, seen from the harness's side of the socket.

    The bash and subagent daemons send each completion as a keyed todo to the harness's Unix socket
    (HIVE_AGENT_SOCKET): `todo.upsert` shows or replaces the todo of a key, `todo.clear` removes it. The wire
    is one JSON object per line each way; docs/harness-protocol.md describes every field.

    \b
    Without a real harness, run the reference sink and point the daemons at it:
      hive-loose-ends serve --socket /tmp/hive/agent.sock &
      HIVE_AGENT_SOCKET=/tmp/hive/agent.sock hive-bash-daemon ...
      hive-loose-ends list --socket /tmp/hive/agent.sock

    What a daemon could not deliver yet waits in its outbox: `hive-loose-ends outbox /var/lib/hive-bash`.

    Exit codes: 0 ok; 1 the other end answered an error (or `serve` cannot take the path); 2 usage error or
    the socket is unreachable.
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
    _take_socket_path(path)
    board = TodoBoard(as_json)
    try:
        server = SinkServer(path, board)
    except OSError as e:
        raise click.ClickException(f"--socket: cannot listen on {path}: {e.strerror or e}") from None
    inode = path.stat().st_ino
    stop = Doorbell()  # a handler that takes a lock (Event.set) can deadlock the thread it interrupts
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.ring())
    thread = threading.Thread(target=server.serve_forever, name="sink", daemon=True)
    thread.start()
    if as_json:
        click.echo(json.dumps({"event": "serving", "socket": str(path), "pid": os.getpid()}))
    else:
        click.echo(f"hive-loose-ends: serving {path} (pid {os.getpid()}); Ctrl-C to stop")
    while not stop.wait(None):
        pass
    server.shutdown()
    server.server_close()
    try:
        if path.stat().st_ino == inode:  # do not remove a socket that someone else bound since
            path.unlink()
    except FileNotFoundError:
        pass


def _request(socket_path: Path, message: dict[str, Any], timeout: float, reply_limit: int) -> dict[str, Any]:
    """One exchange for the client commands: exit 2 when unreachable, 1 on an error or malformed reply."""
    try:
        reply = exchange(socket_path, message, timeout, reply_limit=reply_limit)
    except HarnessUnreachable as e:
        click.echo(f"hive-loose-ends: {e}\nIs the harness (or `hive-loose-ends serve --socket {socket_path}`) "
                   "running?", err=True)
        sys.exit(EXIT_UNREACHABLE)
    except HarnessError as e:
        click.echo(f"hive-loose-ends: {e}", err=True)
        sys.exit(EXIT_ERROR)
    if not reply["ok"]:
        click.echo(f"hive-loose-ends: the socket answered an error: {reply.get('error')}", err=True)
        sys.exit(EXIT_ERROR)
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
        click.echo("hive-loose-ends: the reply has no 'todos' list (does this harness implement todo.list?)", err=True)
        sys.exit(EXIT_ERROR)
    if as_json:
        click.echo(json.dumps(todos, ensure_ascii=False, indent=2))
        return
    if not todos:
        click.echo("no todos")
        return
    _print_table(("SOURCE", "KEY", "AGE", "SUMMARY"), [
        (str(t.get("source", "")), str(t.get("key", "")), _age(t.get("updated_at")), str(t.get("summary", "")))
        for t in todos])


def _print_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """Columns padded to their widest cell; the last one (a summary) is left as long as it is."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths)) + "  " + row[-1])


def _age(updated_at: Any) -> str:
    if not isinstance(updated_at, (int, float)):
        return "-"
    seconds = max(0, int(time.time() - updated_at))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


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
def upsert(socket_path, source, key, summary, body, data_json, timeout) -> None:
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
             timeout, 64 * 1024)
    click.echo("ok")


@main.command()
@socket_option
@SOURCE_OPTION
@KEY_OPTION
@TIMEOUT_OPTION
def clear(socket_path, source, key, timeout) -> None:
    """Send one todo.clear, as a daemon would: for trying out a harness's end of the socket."""
    path = _require_socket(socket_path)
    _request(path, {"op": OP_CLEAR, "key": key, "source": source}, timeout, 64 * 1024)
    click.echo("ok")



@main.command()
@click.argument("state_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--source", help="Only this producer (bash, subagent); default: every source in STATE_DIR.")
@click.option("--json", "as_json", is_flag=True, help="Print the entries as a JSON array (messages in full).")
def outbox(state_dir: Path, source: str | None, as_json: bool) -> None:
    """Show the todos a daemon holds undelivered: its outbox under STATE_DIR (e.g. /var/lib/hive-bash).

    Read-only, so safe beside the running daemon. The table shows source, key, operation and summary, by source,
    oldest change first. Exit codes: 0 (even when empty); 2 when STATE_DIR has no outbox.
    """
    root = state_dir / OUTBOX_DIRNAME
    sources = [source] if source else sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    journals = [(s, root / s / JOURNAL_NAME) for s in sources if (root / s).is_dir()]
    if not journals:
        click.echo(f"hive-loose-ends: no outbox under {root}", err=True)
        sys.exit(EXIT_NO_OUTBOX)
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
