"""The first line of every answer both daemons give: stable `key=value` facts a model or a script can parse."""

from __future__ import annotations

import re
from json.encoder import encode_basestring_ascii  # what json.dumps(str) returns, without its dispatch
from typing import Any

# A value that needs quoting: whitespace (re's \s is str.isspace, both Py_UNICODE_ISSPACE), a quote or `=`.
# One search per value: a generator per character was a third of a `run` answer's text (docs/performance.md).
_NEEDS_QUOTES = re.compile(r"[\s\"'=]").search


def kv(**facts: Any) -> str:
    """`key=value` pairs on one line; a value with spaces or quotes is JSON-quoted so the line stays parseable.
    None is a figure nobody reported (a cost without a result line): shown as `unknown`, never as 0 or none
    (leave it out with `known` or `known_kv`). Floats: six decimals at most for a `..._usd` key, one elsewhere."""
    return _line(facts, "unknown")


def known_kv(**facts: Any) -> str:
    """`kv` of the facts that are known: `kv(**known(...))` in one pass, for the lines every answer starts with."""
    return _line(facts, None)


def _line(facts: dict[str, Any], unknown: str | None) -> str:
    out = []
    for key, value in facts.items():
        if type(value) is not str:  # most facts are text already
            if value is None:
                if unknown is None:
                    continue
                value = unknown
            elif isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, float):
                value = f"{value:.6f}".rstrip("0").rstrip(".") if key.endswith("usd") else f"{value:.1f}"
            value = str(value)
        if not value or _NEEDS_QUOTES(value) is not None:
            value = encode_basestring_ascii(value)
        out.append(f"{key}={value}")
    return " ".join(out)


def known(**facts: Any) -> dict[str, Any]:
    """Only the facts that are known (not None): what an answer cannot vouch for is left out, not guessed."""
    return {k: v for k, v in facts.items() if v is not None}
