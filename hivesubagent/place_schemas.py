"""The start and continue arguments that say where a session runs and what it may use: `cwd` and `worktree`
(start only), `tools`, `allowed_tools`, `disallowed_tools` and `effort` (start keeps them for the session; a
continue may change them for its turn). Schemas and TypedDicts side by side, as in tools.py; the checks that
matter (the directory, the rules' shape) are requests.py's, run whatever the schema let through."""

from __future__ import annotations

from typing import Any, TypedDict

from hivesubagent.requests import EFFORTS, TOOLS_MAX


class OptionArgs(TypedDict, total=False):
    """The tool limits and effort, as OPTIONS declares them."""

    tools: list[str]
    allowed_tools: list[str]
    disallowed_tools: list[str]
    effort: str


class PlaceArgs(TypedDict, total=False):
    """Where a start runs, as PLACE declares it."""

    cwd: str
    worktree: bool


def _list(description: str) -> dict[str, Any]:
    return {"type": "array", "maxItems": TOOLS_MAX, "items": {"type": "string"}, "description": description}


OPTIONS = {
    "tools": _list("Built-in tools it has at all (claude's --tools), e.g. [\"Read\", \"Grep\"]; []: none. "
                   "Default: all."),
    "allowed_tools": _list("claude's --allowedTools rules, e.g. [\"Bash(git *)\"] (permissions are skipped: "
                           "tools and disallowed_tools are what limit it)."),
    "disallowed_tools": _list("claude's --disallowedTools rules, e.g. [\"Bash(git push *)\", \"WebFetch\"]: a "
                              "denied call fails."),
    "effort": {"type": "string", "enum": list(EFFORTS), "description": "claude's --effort. Default: claude's."},
}

# continue: the same arguments, said once on start (each tools/list carries every description into the context)
TURN_OPTIONS = {k: {**v, "description": f"start's {k}, for this turn only. Default: the session's."}
                for k, v in OPTIONS.items()}

PLACE = {
    "cwd": {"type": "string", "minLength": 1, "description": "Absolute directory it works in, kept for the "
                                                             "session; inside {cwd_roots}. Default: {workdir}."},
    "worktree": {"type": "boolean", "description": "Its own git worktree of cwd's repository on a new branch "
                                                   "hive/<name> from HEAD; kept after the turn, merge it with git."},
}

