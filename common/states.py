"""State tables: the allowed changes of a state machine, declared once, and the one check every change passes.

Each machine (a bash task, a subagent turn, the todo delivery thread) declares its table here-style and
changes state only through one function of its own that calls `StateTable.check` first, so an edge that is
not declared is a bug found at once (BadTransition), never a state nobody planned for.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Generic, TypeVar

S = TypeVar("S", bound=Hashable)


_NONE: frozenset[Hashable] = frozenset()  # the edges of a terminal state


class BadTransition(RuntimeError):
    """An edge not in the table was asked for: a bug in the caller, never a user error."""


class StateTable(Generic[S]):
    """`edges[a]` is the set of states `a` may change to; a state missing from `edges` is terminal."""

    def __init__(self, machine: str, edges: Mapping[S, Iterable[S]]):
        self.machine = machine
        self.edges: dict[S, frozenset[S]] = {state: frozenset(targets) for state, targets in edges.items()}

    def allows(self, current: S, new: S) -> bool:
        return new in self.edges.get(current, _NONE)

    def check(self, current: S, new: S, who: str = "") -> S:
        """Return `new` when `current -> new` is declared; raise BadTransition naming the machine otherwise."""
        if not self.allows(current, new):
            subject = f"{self.machine} {who}".strip()
            raise BadTransition(f"{subject}: {_shown(current)} -> {_shown(new)} is not an allowed transition")
        return new


def _shown(state: object) -> str:
    return str(getattr(state, "value", state))
