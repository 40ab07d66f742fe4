"""A session's tool limits and effort: what claude's --tools, --allowedTools, --disallowedTools and --effort
get. Checked by requests.claude_options; kept for the session by the place book; a continue's own replace
them for its turn."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ClaudeOptions:
    """A session's tool limits and effort (checked by requests.claude_options); None: not given, claude's
    default. `tools`: claude's --tools (its built-in tools; empty: none); `allowed`/`disallowed`: its
    --allowedTools/--disallowedTools permission rules; `effort`: its --effort."""

    tools: tuple[str, ...] | None = None
    allowed: tuple[str, ...] | None = None
    disallowed: tuple[str, ...] | None = None
    effort: str | None = None

    def over(self, kept: ClaudeOptions) -> ClaudeOptions:
        """These options where given, else the `kept` ones (a continue changes only what it names)."""
        return ClaudeOptions(*(mine if mine is not None else theirs
                               for mine, theirs in zip(self.as_tuple(), kept.as_tuple(), strict=True)))

    def as_tuple(self) -> tuple[Any, ...]:
        return (self.tools, self.allowed, self.disallowed, self.effort)

    def as_dict(self) -> dict[str, Any]:
        """As the answers show them (and the session record keeps them): only those given."""
        named = zip(("tools", "allowed_tools", "disallowed_tools", "effort"), self.as_tuple(), strict=True)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in named if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClaudeOptions:
        def listed(key: str) -> tuple[str, ...] | None:
            value = data.get(key)
            return None if value is None else tuple(str(v) for v in value)
        effort = data.get("effort")
        return cls(listed("tools"), listed("allowed_tools"), listed("disallowed_tools"),
                   None if effort is None else str(effort))

    def flags(self) -> list[str]:
        """claude's flags for these options, each value its own argv element (a rule such as "Bash(git *)"
        stays one element; no value starts with '-', requests.py checks it)."""
        flags: list[str] = []
        if self.tools is not None:
            flags += ["--tools", *(self.tools or ("",))]  # "": no built-in tool at all
        if self.allowed:
            flags += ["--allowedTools", *self.allowed]
        if self.disallowed:
            flags += ["--disallowedTools", *self.disallowed]
        if self.effort is not None:
            flags += ["--effort", self.effort]
        return flags


NO_OPTIONS = ClaudeOptions()
