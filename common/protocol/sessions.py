"""Handshake-era MCP sessions: a bounded table with idle expiry.

Claude Code reconnects every turn and never sends DELETE (docs/design.md, "MCP clients"), so every turn
mints a session; without a TTL and a cap the table would grow forever. An expired or evicted id is simply
unknown: the transport answers 404 and the client initializes again, as the spec intends.
"""

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from common.protocol.call_progress import Cancellation


@dataclass
class Session:
    id: str
    protocol_version: str
    last_used: float
    # The session's tools/calls in flight, by request id, for `notifications/cancelled` (guarded by the table's lock).
    calls: dict[str | int, Cancellation] = field(default_factory=dict)


class SessionTable:
    def __init__(self, ttl: float, cap: int, clock: Callable[[], float] = time.monotonic):
        self.ttl = ttl
        self.cap = cap
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def create(self, protocol_version: str) -> Session:
        session = Session(secrets.token_hex(16), protocol_version, self._clock())
        with self._lock:
            self._expire_locked()
            self._sessions[session.id] = session
            while len(self._sessions) > self.cap:
                self._sessions.popitem(last=False)  # least recently used first
        return session

    def touch(self, session_id: str) -> Session | None:
        """The live session with that id (marking it used), or None if unknown or expired."""
        with self._lock:
            self._expire_locked()
            session = self._sessions.get(session_id)
            if session is not None:
                session.last_used = self._clock()
                self._sessions.move_to_end(session_id)
            return session

    def end(self, session_id: str) -> bool:
        with self._lock:
            return self._sessions.pop(session_id, None) is not None

    @contextmanager
    def tracking(self, session: Session, request_id: Any, call: Any) -> Iterator[None]:
        """While inside, `notifications/cancelled` naming `request_id` in `session` fires `call.cancel`."""
        if call is None:
            yield
            return
        with self._lock:
            session.calls[request_id] = call.cancel
        try:
            yield
        finally:
            with self._lock:
                if session.calls.get(request_id) is call.cancel:
                    del session.calls[request_id]

    def cancel(self, session: Session, request_id: Any) -> bool:
        """The client cancelled one of its requests: end its wait if it is still in flight."""
        with self._lock:
            cancel = session.calls.get(request_id) if request_id is not None else None
        if cancel is None:
            return False
        cancel.fire()
        return True

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _expire_locked(self) -> None:
        horizon = self._clock() - self.ttl
        # Ordered by last use, so the idle ones are at the front.
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if oldest.last_used >= horizon:
                break
            self._sessions.popitem(last=False)
