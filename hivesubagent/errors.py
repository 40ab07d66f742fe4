"""The subagent engine's refusals: what a request is told when it cannot be served, the message naming the field."""

from __future__ import annotations

from common.protocol.tools import Refusal


class SubagentError(Refusal):
    """A request the subagent engine refuses; the message names the field and the rule (shown to the caller)."""
