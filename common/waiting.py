"""Bounded waits on a threading.Condition with a monotonic deadline, the wait cap, and the wait-slot bound.

A waiter wakes the moment the predicate turns true (the notifier calls `notify_all`); there is no polling
interval. The clock is injectable so tests can drive deadlines without sleeping.
"""

import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

WAIT_CAP_SECONDS = 30.0
DEFAULT_WAIT_SECONDS = 3.0


@dataclass(frozen=True)
class WaitWindow:
    """The wait a caller gets: `seconds` after capping, and whether the cap cut what was asked."""

    seconds: float
    capped: bool
    asked: float


def cap_wait(asked: float | None, default: float = DEFAULT_WAIT_SECONDS, cap: float = WAIT_CAP_SECONDS) -> WaitWindow:
    """Apply the default and the cap to a requested wait (validation of the type/sign is the schema's job)."""
    value = default if asked is None else float(asked)
    return WaitWindow(seconds=min(value, cap), capped=value > cap, asked=value)


def wait_for(
    condition: threading.Condition,
    predicate: Callable[[], bool],
    seconds: float,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Wait on `condition` (which the caller holds) until `predicate()` or `seconds` pass; return the predicate.

    The deadline is computed once from a monotonic clock, so spurious wake-ups never stretch the wait.
    """
    deadline = clock() + seconds
    result = predicate()
    while not result:
        remaining = deadline - clock()
        if remaining <= 0:
            break
        condition.wait(remaining)
        result = predicate()
    return result


SLOTS_TAKEN = "every inline-wait slot is taken by other calls"  # why a call did not wait, in both daemons' words


def retry_advice(free: str) -> str:
    """What a call told it could not wait should do: not the same call at once (the slots are still taken),
    other work first, or free a slot (`free`: what ends the waits it no longer needs, in its daemon's terms)."""
    return f"do not retry at once: do other work first, or {free}"


def busy_advice(free: str, then: str) -> str:
    """The whole sentence: why it did not wait, what to do, and the call that shows the end (`then`)."""
    return f"{SLOTS_TAKEN}; {retry_advice(free)}; then {then}"


class WaitSlots:
    """At most `limit` inline waits at once, so waits never take every request thread.

    `try_acquire` never blocks: when every slot is taken the caller answers at once with the current state
    instead of waiting (docs/design.md, "Threads and locks"): a `kill` or `status` must never queue behind waits.
    """

    def __init__(self, limit: int):
        if limit < 0:
            raise ValueError("limit must be >= 0")
        self.limit = limit
        self._lock = threading.Lock()
        self._in_use = 0
        self.refused = 0  # waits that found every slot taken (the metrics count them)

    @property
    def in_use(self) -> int:
        return self._in_use

    def try_acquire(self) -> bool:
        with self._lock:
            if self._in_use >= self.limit:
                self.refused += 1
                return False
            self._in_use += 1
            return True

    def held(self) -> "_SlotHeld":
        """The wait-slot rule as one block: True inside when a slot was free (wait, then it is released on
        exit), False when every slot is taken (answer at once with the state as it is)."""
        return _SlotHeld(self)

    def release(self) -> None:
        with self._lock:
            if self._in_use <= 0:
                raise RuntimeError("WaitSlots.release without acquire")
            self._in_use -= 1


class _SlotHeld:
    """`WaitSlots.held`'s block: a class rather than a generator (every inline wait enters one)."""

    __slots__ = ("_slots", "_got")

    def __init__(self, slots: WaitSlots):
        self._slots = slots
        self._got = False

    def __enter__(self) -> bool:
        self._got = self._slots.try_acquire()
        return self._got

    def __exit__(self, *exc: object) -> None:
        if self._got:
            self._slots.release()


class Doorbell:
    """A wake-up that is safe to ring from a signal handler: one eventfd write, no lock.

    `threading.Event.set` takes a lock; a Python signal handler runs in the main thread between bytecodes, so a
    SIGCHLD that arrives while the main thread is itself inside `Event.set` deadlocks it on that lock (under
    load that hangs the serving loop and every client times out). Ringing this never blocks.
    """

    def __init__(self) -> None:
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    def ring(self) -> None:
        try:
            os.eventfd_write(self._fd, 1)
        except (BlockingIOError, OSError):
            pass  # the counter is full (it is still rung) or the bell is closed (nobody listens any more)

    def wait(self, timeout: float | None, also: list[int] | tuple[int, ...] = ()) -> bool:
        """Wait until rung, one of the descriptors `also` is readable, or `timeout` seconds pass; True if it
        was rung. Consumes every ring so far."""
        poller = select.poll()
        for fd in (self._fd, *also):
            poller.register(fd, select.POLLIN)
        ready = {fd for fd, _ in poller.poll(None if timeout is None else max(0.0, timeout) * 1000)}
        if self._fd not in ready:
            return False
        try:
            os.eventfd_read(self._fd)
        except BlockingIOError:
            return False
        return True

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
