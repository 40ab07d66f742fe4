"""The one rule for what the daemons promise about notices (both daemons, their answers, todos and tool
descriptions): finished work reaches the agent as a todo only through the harness socket (`HIVE_AGENT_SOCKET`).
With none configured nothing can arrive, so no text may promise a todo; it says how to check instead.

Every text that would promise a notice is chosen by `Notices.say(promise, instead)`: the promise when a socket
is configured, else `instead`, which must not mention a todo (checked each time a text is chosen, so a new
text that breaks the rule fails the first test that builds it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

NO_SOCKET = "no harness socket is configured"  # why nothing arrives, in the words every answer uses
_PROMISE = re.compile(r"\btodos?\b|get_loose_ends|loose end", re.IGNORECASE)


def promises_a_notice(text: str) -> bool:
    """Whether `text` speaks of a todo (what a daemon without a socket must never do). Every match of
    `_PROMISE` holds "todo" or "loose" once case-folded (its one folding letter, U+017F, folds to s), so a text
    with neither skips the search: it runs on every answer of a daemon without a socket, and an IGNORECASE
    search with word edges tries each position of a 200-character text (docs/performance.md)."""
    folded = text.casefold()
    return ("todo" in folded or "loose" in folded) and _PROMISE.search(text) is not None


@dataclass(frozen=True)
class Notices:
    """Whether completions reach the agent, and the texts that follow from it."""

    enabled: bool

    @classmethod
    def for_socket(cls, agent_socket: Any) -> Notices:
        return cls(agent_socket is not None)

    def say(self, promise: str, instead: str) -> str:
        """`promise` when todos reach the agent, else `instead` (refused if it speaks of a todo)."""
        if self.enabled:
            return promise
        if promises_a_notice(instead):
            raise ValueError(f"a text for a daemon without a harness socket promises a todo: {instead!r}")
        return instead
