"""The reference harness end of the todo socket: a board of current todos, served over a Unix socket.

A complete, small implementation of docs/todo-protocol.md's other end: it keeps the current todos in memory
(an upsert replaces, a clear removes), prints every change as it happens, and answers `todo.list`.
`hive-todos serve` runs it; tests use it as the real socket, harness authors can read it as the reference.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import socketserver
import stat
import threading
import time
from pathlib import Path
from typing import Any

import click

from common.todos.wire import MAX_LINE_BYTES, OP_CLEAR, OP_LIST, OP_UPSERT
from common.waiting import Doorbell

CONNECTION_IDLE_TIMEOUT = 30.0  # seconds a connection may sit silent before the sink drops it
BODY_LINES_SHOWN = 10


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


def take_socket_path(path: Path) -> None:
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


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def serve_until_signalled(path: Path, board: TodoBoard, as_json: bool) -> None:
    """Serve `path` until SIGTERM or SIGINT; then remove the socket file if it is still ours."""
    try:
        server = SinkServer(path, board)
    except OSError as e:
        raise click.ClickException(f"--socket: cannot listen on {path}: {e.strerror or e}") from None
    inode = path.stat().st_ino
    stop = Doorbell()  # a handler that takes a lock (Event.set) can deadlock the thread it interrupts
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.ring())
    # A signal the kernel hands to the serving thread only flags it: the Python handler waits for the main
    # thread to run bytecode, and this one sleeps in poll with no timeout. Seen: a SIGTERM left the sink
    # serving for good (a test teardown's 15 s ran out). The wakeup fd wakes the main thread whichever thread
    # took the signal.
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    thread = threading.Thread(target=server.serve_forever, name="sink", daemon=True)
    thread.start()
    if as_json:
        click.echo(json.dumps({"event": "serving", "socket": str(path), "pid": os.getpid()}))
    else:
        click.echo(f"hive-todos: serving {path} (pid {os.getpid()}); Ctrl-C to stop")
    while not stop.wait(None, also=(wake_read,)):
        _drain(wake_read)  # the handler has run by now (between bytecodes) and rung the bell
    signal.set_wakeup_fd(-1)
    server.shutdown()
    server.server_close()
    try:
        if path.stat().st_ino == inode:  # do not remove a socket that someone else bound since
            path.unlink()
    except FileNotFoundError:
        pass
