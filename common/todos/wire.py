"""The todo wire: one JSON request line to the harness's Unix socket, one JSON reply line back.

docs/todo-protocol.md is the contract for the other end. Here: building and checking the two requests the
daemons send (`todo.upsert`, `todo.clear`), and one blocking exchange with a deadline. Nothing here keeps state.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from common.json_text import compact_utf8, strict
from common.names import check_name

OP_UPSERT = "todo.upsert"
OP_CLEAR = "todo.clear"
OP_LIST = "todo.list"
MAX_LINE_BYTES = 1024 * 1024  # one request line at most (docs/todo-protocol.md); larger todos are refused
MAX_REPLY_BYTES = 64 * 1024  # an ack is a few bytes; a longer "reply" is a misbehaving peer
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes including the terminating NUL


class HarnessError(Exception):
    """One request did not get `{"ok": ...}` back; subclasses say how far it got."""


class HarnessUnreachable(HarnessError):
    """Connecting failed: nothing was sent, so the harness certainly did not apply the request."""


class HarnessNoReply(HarnessError):
    """The request was (maybe partly) sent but no full reply line came: timeout, closed connection, too long."""


class HarnessBadReply(HarnessError):
    """A reply line came but is not a JSON object with a boolean `ok`."""


def encode_line(message: dict[str, Any]) -> bytes:
    """One request as a UTF-8 JSON line. Lone surrogates (undecodable file names) become '?' rather than
    bytes that are not UTF-8, which a strict harness would reject."""
    text = compact_utf8(message)
    return text.encode("utf-8", "replace") + b"\n"


def upsert_message(source: str, key: str, summary: Any, body: Any, data: Any) -> dict[str, Any]:
    """Build a `todo.upsert` request, or raise ValueError naming the field and the rule."""
    check_name(key, "key")
    if not isinstance(summary, str):
        raise ValueError(f"summary: must be a string, not {type(summary).__name__}")
    if not isinstance(body, str):
        raise ValueError(f"body: must be a string, not {type(body).__name__}")
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ValueError(f"data: must be a JSON object (a mapping) or None, not {type(data).__name__}")
    try:
        # A round trip, so the outbox and the wire hold plain JSON types (no tuples, no str subclasses); json
        # encodes a dict (any TypedDict is one), not any other mapping.
        data = json.loads(strict(data if isinstance(data, dict) else dict(data)))
    except (TypeError, ValueError) as e:
        raise ValueError(f"data: must be JSON-serialisable ({e})") from None
    # The summary is one line by contract; fold line breaks rather than lose a completion over one.
    summary = " ".join(summary.splitlines())
    message = {"op": OP_UPSERT, "key": key, "source": source, "summary": summary, "body": body, "data": data}
    size = len(encode_line(message))
    if size > MAX_LINE_BYTES:
        raise ValueError(f"body/data: the todo is {size} bytes as JSON; at most {MAX_LINE_BYTES} are allowed")
    return message


def clear_message(source: str, key: str) -> dict[str, Any]:
    check_name(key, "key")
    return {"op": OP_CLEAR, "key": key, "source": source}


def check_socket_path(path: Path) -> None:
    """Raise ValueError if `path` cannot be a Unix socket address (the kernel would say only 'too long')."""
    size = len(os.fsencode(path))
    if size > SOCKET_PATH_MAX:
        raise ValueError(f"socket: {path} is {size} bytes; Unix socket paths must be at most {SOCKET_PATH_MAX}")


def exchange(
    socket_path: Path,
    message: dict[str, Any],
    timeout: float,
    reply_limit: int = MAX_REPLY_BYTES,
) -> dict[str, Any]:
    """Connect, send one request line, read one reply line, close. Return the reply (a dict with a boolean
    `ok`), or raise a HarnessError subclass. One deadline covers connect, send and reply."""
    line = encode_line(message)
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.settimeout(max(timeout, 0.001))
            sock.connect(os.fspath(socket_path))
        except OSError as e:
            raise HarnessUnreachable(f"cannot connect to {socket_path}: {os_reason(e)}") from None
        try:
            _set_remaining(sock, deadline)
            sock.sendall(line)
            raw = _read_line(sock, deadline, reply_limit)
        except OSError as e:
            raise HarnessNoReply(f"no reply from {socket_path}: {os_reason(e)}") from None
    finally:
        sock.close()
    return parse_reply(raw)


def parse_reply(raw: bytes) -> dict[str, Any]:
    try:
        reply = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise HarnessBadReply(f"reply is not JSON: {e}: {_excerpt(raw)}") from None
    if not isinstance(reply, dict):
        raise HarnessBadReply(f"reply must be a JSON object: {_excerpt(raw)}")
    if not isinstance(reply.get("ok"), bool):
        raise HarnessBadReply(f"reply: 'ok' must be true or false: {_excerpt(raw)}")
    return reply


def _read_line(sock: socket.socket, deadline: float, limit: int) -> bytes:
    buf = bytearray()
    while b"\n" not in buf:
        if len(buf) > limit:
            raise HarnessNoReply(f"reply longer than {limit} bytes without a newline")
        _set_remaining(sock, deadline)
        chunk = sock.recv(65536)
        if not chunk:
            raise HarnessNoReply("connection closed before a full reply line" + (f": {_excerpt(buf)}" if buf else ""))
        buf += chunk
    return bytes(buf[: buf.index(b"\n")])


def _set_remaining(sock: socket.socket, deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("timed out")
    sock.settimeout(remaining)


def _excerpt(raw: bytes | bytearray, limit: int = 120) -> str:
    text = bytes(raw[:limit]).decode("utf-8", "replace")
    return repr(text + ("..." if len(raw) > limit else ""))


def os_reason(e: OSError) -> str:
    """What went wrong, for a log line or an error message (a bare socket timeout has no text: its type)."""
    return e.strerror or str(e) or type(e).__name__
