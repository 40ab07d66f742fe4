"""Todos: how the daemons tell the agent about finished work, as keyed todos on the harness socket.

    wire.py      the two requests (todo.upsert, todo.clear) and one exchange with the socket
    outbox.py    the append-only journal that keeps undelivered todos across a crash or restart
    pending.py   the newest undelivered state per key, and the rules that fold an upsert and a clear
    delivery.py  TodoDelivery: upsert/clear that return at once, and the one thread that delivers
    sink.py      the reference harness end of the socket (keeps the board, answers todo.list)
    cli.py       `hive-todos`: serve the reference sink, list a board, read an outbox, send by hand

An engine depends only on the `Todos` protocol below; the daemons pass a TodoDelivery, tests a recorder.
docs/todo-protocol.md is the wire's contract; docs/design.md places todos in the whole.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

log = logging.getLogger(__name__)


class Todos(Protocol):
    """The producer's side: both engines call these, and none may block for long nor raise."""

    def upsert(self, key: str, summary: str, body: str, data: Mapping[str, Any] | None = None) -> Any: ...

    def clear(self, key: str) -> Any: ...

    def repair(self) -> Any:
        """Make the outbox again if it was removed under the daemon; called off the tool calls' path."""


class NoTodos:
    """Todos go to the log only (an engine built without a TodoDelivery, e.g. by a test or a tool)."""

    def upsert(self, key: str, summary: str, body: str, data: Mapping[str, Any] | None = None) -> None:
        log.info("todo %s: %s", key, summary)

    def clear(self, key: str) -> None:
        pass

    def repair(self) -> None:
        pass
