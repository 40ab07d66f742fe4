"""The bash engine's refusals: what a request is told when it cannot be served, the message naming the field."""

from __future__ import annotations

from common.protocol.tools import Refusal


class EngineError(Refusal):
    """A request the bash engine refuses; the message names the field and the rule (shown to the caller as is)."""


class UnknownTask(EngineError):
    """An id that names no task the daemon knows (never was, or pruned)."""
