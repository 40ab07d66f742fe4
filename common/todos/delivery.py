"""Keyed todos to the harness socket: upsert/clear that return at once, an on-disk outbox, one delivery thread.

Both daemons tell the agent about completions as keyed todos on the harness's Unix socket (HIVE_AGENT_SOCKET);
the wire is documented in docs/harness-protocol.md. What this module promises its callers:

- `upsert` and `clear` never block on the harness and never raise: they coalesce the todo into the pending
  map, append it to the outbox journal (`<state_dir>/loose-ends/<source>/outbox.jsonl`, see common/outbox.py)
  and wake the delivery thread. The socket is only ever touched by that thread.
- Once `upsert`/`clear` returned, the todo survives the daemon's death (kill -9 included): its journal line is
  in the kernel's page cache. It is not fsync'ed by default: an fsync under the outbox lock put every tool
  call that produced a todo in line behind the disk (the bash daemon runs two todos a task). A
  power loss can therefore lose the newest todos; it also ends the harness and the agent turn that would
  read them. `fsync=True` restores power-loss durability at that price.
- Per key only the newest state is pending (reading the journal back keeps the last line of each key), and one thread sends one
  request at a time, so an upsert followed by a clear never arrives as clear-then-upsert.
- What the harness does not acknowledge with `{"ok": true}` (down, slow, error or malformed reply) stays in the
  outbox and is retried with capped exponential backoff; a new todo, `flush` or `close` wakes the wait at once.
  The outbox is read back at start-up, so todos survive a restart of the daemon.
- A clear that meets its key's upsert still in the outbox drops that upsert. The clear itself is dropped too
  only when the harness is known to hold nothing for the key (this process saw a clear of it acknowledged and
  sent nothing since). Otherwise an earlier upsert may have reached the harness (in this process, or in an
  earlier one, or one whose reply was lost), and the clear must go out: a clear of a key the harness does not
  hold is acknowledged as a no-op, so being conservative costs one message, never a stale todo.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from common.names import check_name
from common.outbox import Outbox, os_reason
from common.waiting import wait_for

log = logging.getLogger(__name__)

OP_UPSERT = "todo.upsert"
OP_CLEAR = "todo.clear"
OP_LIST = "todo.list"
OUTBOX_DIRNAME = "loose-ends"
MAX_LINE_BYTES = 1024 * 1024  # one request line at most (docs/harness-protocol.md); larger todos are refused
MAX_REPLY_BYTES = 64 * 1024  # an ack is a few bytes; a longer "reply" is a misbehaving peer
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes including the terminating NUL
KNOWN_ABSENT_CAP = 4096  # keys remembered as "harness holds nothing"; forgetting one only costs a redundant clear


# ---------------------------------------------------------------------------------------------------- the wire


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
    text = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
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
    if not isinstance(data, dict):
        raise ValueError(f"data: must be a JSON object (a dict) or None, not {type(data).__name__}")
    try:
        # A round trip, so the outbox and the wire hold plain JSON types (no tuples, no str subclasses).
        data = json.loads(json.dumps(data, allow_nan=False))
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
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Connect, send one request line, read one reply line, close. Return the reply (a dict with a boolean
    `ok`), or raise a HarnessError subclass. One deadline covers connect, send and reply."""
    line = encode_line(message)
    deadline = clock() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.settimeout(max(timeout, 0.001))
            sock.connect(os.fspath(socket_path))
        except OSError as e:
            raise HarnessUnreachable(f"cannot connect to {socket_path}: {os_reason(e)}") from None
        try:
            _set_remaining(sock, deadline, clock)
            sock.sendall(line)
            raw = _read_line(sock, deadline, reply_limit, clock)
        except OSError as e:
            raise HarnessNoReply(f"no reply from {socket_path}: {os_reason(e)}") from None
    finally:
        sock.close()
    return parse_reply(raw)


def parse_reply(raw: bytes) -> dict[str, Any]:
    try:
        reply = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise HarnessBadReply(f"reply is not JSON: {e}: {_shown(raw)}") from None
    if not isinstance(reply, dict):
        raise HarnessBadReply(f"reply must be a JSON object: {_shown(raw)}")
    if not isinstance(reply.get("ok"), bool):
        raise HarnessBadReply(f"reply: 'ok' must be true or false: {_shown(raw)}")
    return reply


def _read_line(sock: socket.socket, deadline: float, limit: int, clock: Callable[[], float]) -> bytes:
    buf = bytearray()
    while b"\n" not in buf:
        if len(buf) > limit:
            raise HarnessNoReply(f"reply longer than {limit} bytes without a newline")
        _set_remaining(sock, deadline, clock)
        chunk = sock.recv(65536)
        if not chunk:
            raise HarnessNoReply("connection closed before a full reply line" + (f": {_shown(buf)}" if buf else ""))
        buf += chunk
    return bytes(buf[: buf.index(b"\n")])


def _set_remaining(sock: socket.socket, deadline: float, clock: Callable[[], float]) -> None:
    remaining = deadline - clock()
    if remaining <= 0:
        raise socket.timeout("timed out")
    sock.settimeout(remaining)


def _shown(raw: bytes | bytearray, limit: int = 120) -> str:
    text = bytes(raw[:limit]).decode("utf-8", "replace")
    return repr(text + ("..." if len(raw) > limit else ""))


# ---------------------------------------------------------------------------------------------------- the outbox


@dataclass
class _Entry:
    """The newest pending state of one key. `maybe_held`: the harness may hold an earlier todo of this key,
    so a clear must be sent rather than simply dropping this entry."""

    key: str
    seq: int  # order of the last change; delivery goes oldest first
    message: dict[str, Any]
    maybe_held: bool

    @property
    def op(self) -> str:
        return self.message["op"]


# ---------------------------------------------------------------------------------------------------- delivery

IDLE = "idle"  # nothing pending (or no socket configured)
SENDING = "sending"  # one request is on the wire
BACKOFF = "backoff"  # the last round failed; waiting for the retry time, a new todo, flush or close
CLOSED = "closed"

TRANSITIONS: dict[str, frozenset[str]] = {
    IDLE: frozenset({SENDING, CLOSED}),
    SENDING: frozenset({IDLE, BACKOFF, CLOSED}),
    BACKOFF: frozenset({SENDING, IDLE, CLOSED}),
    CLOSED: frozenset(),
}


@dataclass(frozen=True)
class _Outcome:
    delivered: bool
    reached: bool  # the request got past connect: the harness may have applied it
    transport_failed: bool  # down, timed out or hung up: the rest of the round would fail the same way
    reason: str = ""


class LooseEnds:
    """Keyed todos of one `source` ("bash", "subagent") for the harness at `socket_path` (None: outbox only).

    `upsert`/`clear` return at once and never raise (they return False when the todo was refused, with the
    reason logged); `flush(timeout)` waits until nothing is pending; `close()` stops the delivery thread and
    leaves what is undelivered in the outbox for the next start.
    """

    def __init__(
        self,
        source: str,
        state_dir: Path,
        socket_path: Path | None,
        *,
        timeout: float = 2.0,
        backoff_initial: float = 0.25,
        backoff_max: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        fsync: bool = False,
    ):
        """`timeout` (seconds): one request, connect to reply. Backoff (seconds): the first retry after a failed
        round, doubling up to `backoff_max`, so a harness that comes back is noticed within that cap. A bad
        `source` raises InvalidName: that is a programming error, found at start-up."""
        self.source = check_name(source, "source")
        self.socket_path = Path(socket_path) if socket_path is not None else None
        self.timeout = timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._clock = clock
        self._cond = threading.Condition()
        self._pending: OrderedDict[str, _Entry] = OrderedDict()
        self._known_absent: OrderedDict[str, None] = OrderedDict()
        self._in_flight: _Entry | None = None
        self._failed_this_round: set[str] = set()
        self._retry_at: float | None = None
        self._delay = backoff_initial
        self._kick = False
        self._closing = False
        self._state = IDLE
        self._failing_since: float | None = None
        self.last_error: str | None = None
        self._outbox = Outbox(Path(state_dir).absolute() / OUTBOX_DIRNAME / self.source, fsync=fsync)
        self._seq = self._load()
        self._thread = threading.Thread(target=self._run, name=f"loose-ends-{self.source}", daemon=True)
        if self.socket_path is None:
            log.info("no harness socket is configured: %s todos wait in %s (%d now)", source, self._outbox.journal,
                     len(self._pending))
            return
        try:
            check_socket_path(self.socket_path)
        except ValueError as e:
            log.error("%s; todos will wait in the outbox", e)
        self._thread.start()

    # ------------------------------------------------------------------------------------------ the callers' side

    def upsert(self, key: str, summary: str, body: str, data: dict[str, Any] | None = None) -> bool:
        """Make the harness show the todo `key` with this content (replacing any earlier one of that key)."""
        try:
            message = upsert_message(self.source, key, summary, body, data)
        except ValueError as e:
            log.error("%s todo upsert refused: %s", self.source, e)
            return False
        return self._submit(key, message)

    def clear(self, key: str) -> bool:
        """Make the harness drop the todo `key` (a no-op if it has none)."""
        try:
            message = clear_message(self.source, key)
        except ValueError as e:
            log.error("%s todo clear refused: %s", self.source, e)
            return False
        return self._submit(key, message)

    def flush(self, timeout: float) -> bool:
        """Retry now and wait up to `timeout` seconds until nothing is pending; True when all was delivered.
        Without a socket nothing can be delivered: it answers at once."""
        with self._cond:
            if self.socket_path is None or self._closing:
                return not self._pending
            self._kick = True
            self._cond.notify_all()
            return wait_for(self._cond, lambda: not self._pending and self._in_flight is None, timeout, self._clock)

    def close(self, timeout: float | None = None) -> None:
        """Stop the delivery thread (waking any backoff wait); what is pending stays in the outbox. Waits up to
        `timeout` seconds (default: one request's timeout and a second) for a request on the wire to end."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(self.timeout + 1.0 if timeout is None else timeout)
        with self._cond:
            if self._state != CLOSED and not self._thread.is_alive():
                self._set_state(CLOSED)

    def pending_keys(self) -> list[str]:
        """Keys not yet acknowledged by the harness, oldest change first."""
        with self._cond:
            return list(self._pending)

    def status(self) -> dict[str, Any]:
        """For health output and tests: delivery state, pending count and the last failure."""
        with self._cond:
            return {"state": self._state, "pending": len(self._pending), "socket": str(self.socket_path or ""),
                    "last_error": self.last_error}

    def _submit(self, key: str, message: dict[str, Any]) -> bool:
        try:
            with self._cond:
                self._coalesce(key, message)
                self._kick = True
                self._cond.notify_all()
        except Exception:  # noqa: BLE001 - a todo must never fail the tool call that produced it
            log.exception("%s todo %s for %s could not be queued", self.source, message["op"], key)
            return False
        if self.socket_path is None:
            # DEBUG, not INFO: the bash daemon makes two todos a task, and a log line each cost its throughput
            # 2-3% (scripts/bench.py, interleaved runs), and two log lines a task bury everything else. That todos
            # wait in the outbox is said once at start-up; `hive-loose-ends outbox` lists them.
            log.debug("todo (no harness socket) %s %s/%s %s", message["op"], self.source, key, message.get("summary", ""))
        return True

    def _coalesce(self, key: str, message: dict[str, Any]) -> None:
        """Fold the new state of `key` into the pending map and the outbox. Called with the lock held."""
        current = self._pending.get(key)
        in_flight = current is not None and current is self._in_flight
        if message["op"] == OP_CLEAR:
            if current is None and key in self._known_absent:
                return  # the harness already holds nothing for this key
            if current is not None and current.op == OP_CLEAR:
                return  # that clear is still to come (or on the wire; a failure keeps it pending)
            if current is not None and not in_flight and not current.maybe_held:
                del self._pending[key]  # the harness never saw this key: cancel the upsert, send nothing
                self._outbox.drop(key)
                return
            maybe_held = True
        elif current is None:
            maybe_held = key not in self._known_absent
        else:
            maybe_held = current.maybe_held or in_flight
        self._seq += 1
        entry = _Entry(key, self._seq, message, maybe_held)
        self._pending.pop(key, None)
        self._pending[key] = entry  # to the back: delivery follows the order of the last change
        self._outbox.save(entry.seq, key, message)

    def _load(self) -> int:
        for stored in self._outbox.load():
            try:
                message = self._checked(stored.key, stored.message)
            except ValueError as e:
                log.warning("todo outbox: the entry for %r is unusable (%s); dropped: %.300r", stored.key, e, stored.message)
                self._outbox.drop(stored.key)
                continue
            # Written by an earlier run, which may have sent it already: a later clear must go out.
            self._pending[stored.key] = _Entry(stored.key, stored.seq, message, maybe_held=True)
        return max((e.seq for e in self._pending.values()), default=0)

    def _checked(self, key: str, message: dict[str, Any]) -> dict[str, Any]:
        """A message read back from the outbox, rebuilt through the constructors that check every field."""
        if message.get("key") != key or message.get("source") != self.source:
            raise ValueError("key/source: do not match the entry")
        if message.get("op") == OP_UPSERT:
            return upsert_message(self.source, key, message.get("summary"), message.get("body"), message.get("data"))
        if message.get("op") == OP_CLEAR:
            return clear_message(self.source, key)
        raise ValueError(f"op: {message.get('op')!r} is not {OP_UPSERT} or {OP_CLEAR}")

    # ------------------------------------------------------------------------------------------ the delivery thread

    def _set_state(self, new: str) -> None:
        """The one guarded transition of the delivery state (lock held)."""
        if new == self._state:
            return
        if new not in TRANSITIONS[self._state]:
            raise RuntimeError(f"loose-ends delivery: {self._state} -> {new} is not an allowed transition")
        self._state = new

    def _run(self) -> None:
        while True:
            entry = self._next_entry()
            if entry is None:
                return
            try:
                outcome = self._send(entry)
            except Exception as e:  # noqa: BLE001 - the thread must outlive any surprise; retry later
                log.exception("%s todo delivery failed unexpectedly", self.source)
                outcome = _Outcome(False, True, True, f"unexpected error: {e}")
            with self._cond:
                self._finish(entry, outcome)
                self._cond.notify_all()

    def _next_entry(self) -> _Entry | None:
        """Wait (on the condition, no polling) until an entry may be sent now; None once closing."""
        with self._cond:
            while True:
                if self._closing:
                    self._set_state(CLOSED)
                    return None
                if self._kick:
                    self._kick, self._retry_at = False, None
                    self._failed_this_round.clear()
                if not self._pending:
                    self._retry_at = None
                    self._failed_this_round.clear()
                    self._set_state(IDLE)
                    self._cond.wait()
                    continue
                if self._retry_at is not None:
                    remaining = self._retry_at - self._clock()
                    if remaining > 0:
                        self._set_state(BACKOFF)
                        self._cond.wait(remaining)
                        continue
                    self._retry_at = None
                    self._failed_this_round.clear()
                entry = next((e for e in self._pending.values() if e.key not in self._failed_this_round), None)
                if entry is None:  # every pending key was refused in this round
                    self._schedule_retry()
                    continue
                self._in_flight = entry
                self._set_state(SENDING)
                return entry

    def _send(self, entry: _Entry) -> _Outcome:
        assert self.socket_path is not None
        try:
            reply = exchange(self.socket_path, entry.message, self.timeout, clock=self._clock)
        except HarnessUnreachable as e:
            return _Outcome(False, False, True, str(e))
        except HarnessNoReply as e:
            return _Outcome(False, True, True, str(e))
        except HarnessBadReply as e:
            return _Outcome(False, True, False, str(e))
        if reply["ok"] is True:
            return _Outcome(True, True, False)
        return _Outcome(False, True, False, f"harness answered an error: {str(reply.get('error'))[:300]}")

    def _finish(self, entry: _Entry, outcome: _Outcome) -> None:
        """Record one request's outcome (lock held). Only an entry that is still the key's newest state leaves
        the pending map: one queued while it was on the wire replaces it and goes out next."""
        self._in_flight = None
        key, current = entry.key, self._pending.get(entry.key)
        if outcome.reached and entry.op == OP_UPSERT:
            entry.maybe_held = True
            self._known_absent.pop(key, None)
        if outcome.delivered:
            if current is entry:
                del self._pending[key]
                self._outbox.drop(key)
            if entry.op == OP_CLEAR:
                self._remember_absent(key)
            self._delay = self.backoff_initial
            if self._failing_since is not None:
                log.info("harness socket %s answers again; %d todo(s) pending", self.socket_path, len(self._pending))
                self._failing_since = None
            return
        if self._failing_since is None:
            self._failing_since = self._clock()
            log.warning("%s todo %s for %s not delivered (%s); kept in the outbox, retrying with backoff",
                        self.source, entry.op, key, outcome.reason)
        else:
            log.debug("%s todo %s for %s not delivered: %s", self.source, entry.op, key, outcome.reason)
        self.last_error = outcome.reason
        if outcome.transport_failed:
            self._schedule_retry()
        else:
            self._failed_this_round.add(key)  # refused: try the other keys, retry this one after the backoff

    def _schedule_retry(self) -> None:
        self._retry_at = self._clock() + self._delay
        self._delay = min(self._delay * 2, self.backoff_max)

    def _remember_absent(self, key: str) -> None:
        self._known_absent.pop(key, None)
        self._known_absent[key] = None
        while len(self._known_absent) > KNOWN_ABSENT_CAP:
            self._known_absent.popitem(last=False)
