"""TodoRecorder: the engines' `Todos` (common/todos) for in-process tests, recording every call in order.

Importable from any test (`pythonpath = tests` in setup.cfg). Tests wait on it with deadlines, never sleeps.
"""

import threading
from typing import Any

from common.waiting import wait_for


class TodoRecorder:
    """`calls`: ("upsert", key, summary, body, data) and ("clear", key) tuples, in the order they were made."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.cond = threading.Condition()

    def upsert(self, key: str, summary: str, body: str, data: dict | None = None) -> bool:
        with self.cond:
            self.calls.append(("upsert", key, summary, body, data))
            self.cond.notify_all()
        return True

    def clear(self, key: str) -> bool:
        with self.cond:
            self.calls.append(("clear", key))
            self.cond.notify_all()
        return True

    def repair(self) -> bool:
        return False  # no outbox: nothing can be removed under it

    def for_key(self, key: str) -> list[tuple]:
        with self.cond:
            return [c for c in self.calls if c[1] == key]

    def upserts(self, key: str) -> list[dict[str, Any]]:
        """The upserts of `key` as {"summary", "body", "data"}, oldest first."""
        return [{"summary": c[2], "body": c[3], "data": c[4]} for c in self.for_key(key) if c[0] == "upsert"]

    def wait_upserts(self, key: str, count: int = 1, seconds: float = 60.0) -> list[dict[str, Any]]:
        """The upserts of `key` once there are at least `count`; fails the test after `seconds`."""
        with self.cond:
            ok = wait_for(self.cond, lambda: len(self.upserts(key)) >= count, seconds)
        assert ok, f"no {count} todo(s) for {key!r} within {seconds}s; calls: {self.calls}"
        return self.upserts(key)
