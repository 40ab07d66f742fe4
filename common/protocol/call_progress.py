"""What a waiting tools/call tells its client while it waits, and how the client stops the wait.

- `Cancellation`: fired when the client cancels the call (`notifications/cancelled` in the handshake era) or
  hangs up (closes the response stream: the 2026-07-28 era's only cancel). A wait includes `fired` in its
  predicate and registers `wakes(cond)`, so a cancel ends it at once; the task itself runs on.
- `ProgressNotifier`: `notifications/progress` for a call whose `_meta` carries a `progressToken` from a client
  that accepts text/event-stream (common/protocol/event_stream.py sends them); every other call gets `NO_PROGRESS`.
  Each message is built and checked with the SDK's type for the call's protocol version.
- `Pacer`: when a notification is due (PACE): at most one a MIN_GAP, one within LINE_POLL of news after a
  quiet gap, a heartbeat every HEARTBEAT otherwise.
- `paced_wait`: a condition wait that reports through the pacer; the subagent daemon's status wait uses it as is,
  the bash daemon's inline wait drives the same pacer with its own output checks (hivebash/answers/inline_wait.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from common.protocol.wire_types import notification_type
from common.waiting import wait_for

log = logging.getLogger(__name__)

MIN_GAP = 1.0  # seconds: at most one notification in this long (the first one counts from the wait's start)
HEARTBEAT = 2.0  # seconds: with nothing new, a notification this long after the last one (the seconds tick on)
LINE_POLL = 0.05  # seconds: how often news is looked for once MIN_GAP has passed (news is sent within ~this)
MESSAGE_CHARS = 199  # a progress message is one line under 200 characters


class Cancellation:
    """Set once, by whoever learns that the client no longer wants the answer; wakes the waits registered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fired = False
        self._wakers: list[Callable[[], None]] = []

    @property
    def fired(self) -> bool:
        return self._fired

    def fire(self) -> None:
        """Mark the call cancelled and wake its waits (callable from any thread, the serving loop's too)."""
        with self._lock:
            if self._fired:
                return
            self._fired = True
            wakers, self._wakers = self._wakers, []
        for wake in wakers:
            try:
                wake()
            except Exception:  # a waker that fails must not break the serving loop that hung up
                log.exception("waking a cancelled wait failed")

    def wakes(self, cond: threading.Condition) -> _Wakes:
        """While inside: a cancel notifies `cond` (whose waiters check `fired`). Take it without holding `cond`."""
        return _Wakes(self, cond)


class _Wakes:
    """`Cancellation.wakes`'s block: a class rather than a generator (every inline wait enters one)."""

    __slots__ = ("_cancel", "_cond")

    def __init__(self, cancel: Cancellation, cond: threading.Condition):
        self._cancel, self._cond = cancel, cond

    def __enter__(self) -> None:
        cancel = self._cancel
        with cancel._lock:
            cancel._wakers.append(self.wake)

    def __exit__(self, *exc: object) -> None:
        cancel = self._cancel
        with cancel._lock:
            if self.wake in cancel._wakers:
                cancel._wakers.remove(self.wake)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


class ProgressSink(Protocol):
    """Where a call's notifications go (common/event_stream.EventStream): False once the client is gone."""

    def send(self, message: dict[str, Any]) -> bool: ...


class ProgressNotifier:
    """`notifications/progress` for one call: `report` sends one now (the pacing is the caller's, `Pacer`)."""

    def __init__(self, token: str | int, version: str, sink: ProgressSink, cancel: Cancellation):
        self.token, self.version, self.sink, self.cancel = token, version, sink, cancel
        self._last = -1.0
        try:  # the era's types are imported now if this is its first call, not on the way to the first report
            self._wire_type: Any = notification_type("notifications/progress", version)
        except (KeyError, ValueError):
            self._wire_type = None  # a version without progress: `report` logs it

    @property
    def wanted(self) -> bool:
        return not self.cancel.fired

    def report(self, progress: float, total: float | None, message: str) -> None:
        """One notification; never raises. `progress` must grow: a value at or below the last one is raised
        a little above it (the spec: it increases with every notification)."""
        if self.cancel.fired:
            return
        progress = max(round(progress, 1), round(self._last + 0.1, 1))
        self._last = progress
        params: dict[str, Any] = {"progressToken": self.token, "progress": progress, "message": message[:MESSAGE_CHARS]}
        if total is not None:
            params["total"] = total
        try:
            if self._wire_type is None:
                raise KeyError(("notifications/progress", self.version))
            notice = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
            body = self._wire_type.model_validate(notice).model_dump(by_alias=True, mode="json", exclude_none=True)
        except Exception:  # our bug (or a version without progress): log it, never break the call
            log.exception("progress notification does not match the %s schema", self.version)
            return
        if not self.sink.send(body):
            self.cancel.fire()  # the stream is gone: so is whoever would read the answer


class ProgressReporter(Protocol):
    """What a wait reports through: a ProgressNotifier, or NO_PROGRESS (`wanted` False: nothing to pace)."""

    @property
    def wanted(self) -> bool: ...

    def report(self, progress: float, total: float | None, message: str) -> None: ...


class _NoProgress:
    """The reporter of a call that asked for no progress (or cannot receive it)."""

    @property
    def wanted(self) -> bool:
        return False

    def report(self, progress: float, total: float | None, message: str) -> None:
        return None


NO_PROGRESS: ProgressReporter = _NoProgress()


@dataclass
class Pacer:
    """When the next notification is due, from when the last went out and whether anything is new since."""

    started: float
    min_gap: float = MIN_GAP
    heartbeat: float = HEARTBEAT
    poll: float = LINE_POLL

    def __post_init__(self) -> None:
        self.sent = self.started  # the wait's start counts as a notification: none in its first MIN_GAP

    def due(self, now: float, news: bool) -> bool:
        """Whether to send one now (and if so, count it as sent)."""
        since = now - self.sent
        if since >= self.heartbeat or (news and since >= self.min_gap):
            self.sent = now
            return True
        return False

    def next_look(self, now: float) -> float:
        """Seconds until it is worth looking again: the end of the gap, then every `poll` up to the heartbeat."""
        since = now - self.sent
        if since < self.min_gap:
            return self.min_gap - since
        return max(0.0, min(self.poll, self.heartbeat - since))


def paced_wait(cond: threading.Condition, done: Callable[[], bool], seconds: float, progress: ProgressReporter,
               cancel: Cancellation,
               news: Callable[[], object], message: Callable[[float], str],
               clock: Callable[[], float] = time.monotonic) -> bool:
    """Wait (not holding `cond`) until `done()` (checked under `cond`), a cancel, or `seconds`; meanwhile report
    progress as the pacer says. `news()` (outside the lock) returns a value that changes when there is
    something new to tell; `message(waited)` the line to send. Returns done()."""
    start = clock()
    deadline, pacer = start + seconds, Pacer(start)
    with cancel.wakes(cond):
        if not progress.wanted:
            with cond:
                wait_for(cond, lambda: done() or cancel.fired, seconds, clock)
                return done()
        last_news = news()
        while True:
            now = clock()
            remaining = deadline - now
            with cond:
                finished = done()
                if finished or cancel.fired or remaining <= 0:
                    return finished
                cond.wait(min(remaining, pacer.next_look(now)))
                if done() or cancel.fired:
                    continue
            now, current = clock(), news()
            if pacer.due(now, current != last_news) and now < deadline:
                last_news = current
                progress.report(now - start, seconds, message(now - start))
