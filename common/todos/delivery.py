"""TodoDelivery: keyed todos to the harness socket; upsert/clear return at once, one thread delivers.

What it promises its callers (the daemons' engines):

- `upsert` and `clear` never block on the harness and never raise: they coalesce the todo into the pending
  map (common/todos/pending.py), append it to the outbox journal (common/todos/outbox.py) and wake the
  delivery thread. The socket is only ever touched by that thread.
- Once `upsert`/`clear` returned, the todo survives the daemon's death (kill -9 included): its journal line is
  in the kernel's page cache. It is not fsync'ed by default, because an fsync under the delivery lock would
  put every tool call that produces a todo in line behind the disk. A power loss can therefore lose the newest
  todos; it also ends the harness and the agent turn that would read them. `fsync=True` restores power-loss
  durability at that price.
- Per key only the newest state is pending, and one thread sends one request at a time, so an upsert followed
  by a clear never arrives as clear-then-upsert.
- What the harness does not acknowledge with `{"ok": true}` (down, slow, error or malformed reply) stays in the
  outbox and is retried with capped exponential backoff; a new todo, `flush` or `close` wakes the wait at once.
  The outbox is read back at start-up, so todos survive a restart of the daemon.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.names import check_name
from common.states import StateTable
from common.todos.outbox import OUTBOX_DIRNAME, Outbox
from common.todos.pending import Entry, PendingTodos
from common.todos.wire import (
    HarnessBadReply,
    HarnessNoReply,
    HarnessUnreachable,
    check_socket_path,
    clear_message,
    exchange,
    upsert_message,
)
from common.waiting import wait_for

log = logging.getLogger(__name__)

IDLE = "idle"  # nothing pending (or no socket configured)
SENDING = "sending"  # one request is on the wire
BACKOFF = "backoff"  # the last round failed; waiting for the retry time, a new todo, flush or close
CLOSED = "closed"

DELIVERY_STATES = StateTable("todo delivery", {
    IDLE: {SENDING, CLOSED},
    SENDING: {IDLE, BACKOFF, CLOSED},
    BACKOFF: {SENDING, IDLE, CLOSED},
})


@dataclass(frozen=True)
class _Outcome:
    delivered: bool
    reached: bool  # the request got past connect: the harness may have applied it
    transport_failed: bool  # down, timed out or hung up: the rest of the round would fail the same way
    reason: str = ""


class TodoDelivery:
    """Keyed todos of one `source` ("bash", "subagent") for the harness at `socket_path` (None: outbox only).

    `upsert`/`clear` return at once and never raise (they return False when the todo was refused, with the
    reason logged); `flush(timeout)` waits until nothing is pending; `close()` stops the delivery thread and
    leaves what is undelivered in the outbox for the next start. One condition, `_cond`, guards every field.
    """

    def __init__(self, source: str, state_dir: Path, socket_path: Path | None, *, timeout: float = 2.0,
                 backoff_initial: float = 0.25, backoff_max: float = 10.0, fsync: bool = False):
        """`timeout` (seconds): one request, connect to reply. Backoff (seconds): the first retry after a failed
        round, doubling up to `backoff_max`, so a harness that comes back is noticed within that cap. A bad
        `source` raises InvalidName: that is a programming error, found at start-up."""
        self.source = check_name(source, "source")
        self.socket_path = Path(socket_path) if socket_path is not None else None
        self.timeout = timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._cond = threading.Condition()
        self._in_flight: Entry | None = None
        self._failed_this_round: set[str] = set()
        self._retry_at: float | None = None
        self._delay = backoff_initial
        self._kick = False
        self._closing = False
        self._state = IDLE
        self._failing_since: float | None = None
        self.last_error: str | None = None
        self.delivered = self.failures = 0  # requests the harness accepted; requests that failed (metrics)
        self._outbox = Outbox(Path(state_dir).absolute() / OUTBOX_DIRNAME / self.source, fsync=fsync)
        self._pending = PendingTodos(self.source, self._outbox)
        self._thread = threading.Thread(target=self._run, name=f"todos-{self.source}", daemon=True)
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

    def upsert(self, key: str, summary: str, body: str, data: Mapping[str, Any] | None = None) -> bool:
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
            return wait_for(self._cond, lambda: not self._pending and self._in_flight is None, timeout)

    def wait_until(self, predicate: Callable[[], Any], timeout: float) -> bool:
        """Wait up to `timeout` seconds until `predicate()` holds, re-checked at every change of the delivery
        (a request's outcome, a new todo, a state change); for health checks and tests."""
        with self._cond:
            return wait_for(self._cond, predicate, timeout)

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
                self._set_state_locked(CLOSED)

    def repair(self) -> bool:
        """Make the outbox again from memory if it was removed under the daemon (one fstat); True if it was.
        The fstat comes first, without the condition: every `run` calls this after its answer, and waiting there
        behind the workers' journal appends cost a request thread ~0.7 ms a task under load."""
        try:
            if not self._outbox.looks_removed():
                return False
            with self._cond:
                return self._outbox.repair_if_removed()
        except Exception:
            log.exception("%s todo outbox could not be checked", self.source)
            return False

    def status(self) -> dict[str, Any]:
        """For health output, tests and the bench: delivery state, pending count, the last failure, whether a
        request is on the wire or about to be (`busy`), and whether the delivery thread runs."""
        with self._cond:
            return {"state": self._state, "pending": len(self._pending), "socket": str(self.socket_path or ""),
                    "last_error": self.last_error, "busy": self._kick or self._in_flight is not None,
                    "thread_alive": self._thread.is_alive(), "delivered": self.delivered,
                    "failures": self.failures}

    def _submit(self, key: str, message: dict[str, Any]) -> bool:
        try:
            with self._cond:
                self._pending.coalesce(key, message, self._in_flight)
                self._kick = True
                self._cond.notify_all()
        except Exception:
            log.exception("%s todo %s for %s could not be queued", self.source, message["op"], key)
            return False
        if self.socket_path is None:
            # DEBUG, not INFO: the bash daemon makes a todo or two a task (a long one's "running", then its
            # end), and a log line each costs throughput
            # (docs/performance.md) and buries everything else. That todos wait in the outbox is said once at
            # start-up; `hive-todos outbox` lists them.
            log.debug("todo (no harness socket) %s %s/%s %s",
                      message["op"], self.source, key, message.get("summary", ""))
        return True

    # ------------------------------------------------------------------------------------------ the delivery thread

    def _set_state_locked(self, new: str) -> None:
        """The one guarded transition of the delivery state (caller holds `_cond`)."""
        if new != self._state:
            self._state = DELIVERY_STATES.check(self._state, new, self.source)
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            entry = self._next_entry()
            if entry is None:
                return
            self.repair()  # here, off the callers' path: a removed journal is made again before it is needed
            try:
                outcome = self._send(entry)
            except Exception as e:
                log.exception("%s todo delivery failed unexpectedly", self.source)
                outcome = _Outcome(False, True, True, f"unexpected error: {e}")
            with self._cond:
                self._finish_locked(entry, outcome)
                self._cond.notify_all()

    def _next_entry(self) -> Entry | None:
        """Wait (on the condition, no polling) until an entry may be sent now; None once closing."""
        with self._cond:
            while True:
                if self._closing:
                    self._set_state_locked(CLOSED)
                    return None
                if self._kick:
                    self._kick, self._retry_at = False, None
                    self._failed_this_round.clear()
                if not self._pending:
                    self._retry_at = None
                    self._failed_this_round.clear()
                    self._set_state_locked(IDLE)
                    self._cond.wait()
                    continue
                if self._retry_at is not None:
                    remaining = self._retry_at - time.monotonic()
                    if remaining > 0:
                        self._set_state_locked(BACKOFF)
                        self._cond.wait(remaining)
                        continue
                    self._retry_at = None
                    self._failed_this_round.clear()
                entry = next((e for e in self._pending if e.key not in self._failed_this_round), None)
                if entry is None:  # every pending key was refused in this round
                    self._schedule_retry_locked()
                    continue
                self._in_flight = entry
                self._set_state_locked(SENDING)
                return entry

    def _send(self, entry: Entry) -> _Outcome:
        assert self.socket_path is not None
        try:
            reply = exchange(self.socket_path, entry.message, self.timeout)
        except HarnessUnreachable as e:
            return _Outcome(False, False, True, str(e))
        except HarnessNoReply as e:
            return _Outcome(False, True, True, str(e))
        except HarnessBadReply as e:
            return _Outcome(False, True, False, str(e))
        if reply["ok"] is True:
            return _Outcome(True, True, False)
        return _Outcome(False, True, False, f"harness answered an error: {str(reply.get('error'))[:300]}")

    def _finish_locked(self, entry: Entry, outcome: _Outcome) -> None:
        """Record one request's outcome (caller holds `_cond`)."""
        self._in_flight = None
        self._pending.settle(entry, outcome.reached, outcome.delivered)
        self.delivered += outcome.delivered
        self.failures += not outcome.delivered
        if outcome.delivered:
            self._delay = self.backoff_initial
            if self._failing_since is not None:
                log.info("harness socket %s answers again; %d todo(s) pending", self.socket_path, len(self._pending))
                self._failing_since = None
            return
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            log.warning("%s todo %s for %s not delivered (%s); kept in the outbox, retrying with backoff",
                        self.source, entry.op, entry.key, outcome.reason)
        else:
            log.debug("%s todo %s for %s not delivered: %s", self.source, entry.op, entry.key, outcome.reason)
        self.last_error = outcome.reason
        if outcome.transport_failed:
            self._schedule_retry_locked()
        else:
            self._failed_this_round.add(entry.key)  # refused: try the other keys, retry this one after the backoff

    def _schedule_retry_locked(self) -> None:
        self._retry_at = time.monotonic() + self._delay
        self._delay = min(self._delay * 2, self.backoff_max)
