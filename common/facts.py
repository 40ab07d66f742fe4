"""The first line of every answer both daemons give: stable `key=value` facts a model or a script can parse."""

from __future__ import annotations

import json
from typing import Any


def kv(**facts: Any) -> str:
    """`key=value` pairs on one line; a value with spaces or quotes is JSON-quoted so the line stays parseable.
    None is a figure nobody reported (a cost without a result line): shown as `unknown`, never as 0 or none
    (leave it out with `known`). Floats: six decimals at most for a `..._usd` key, one elsewhere."""
    out = []
    for key, value in facts.items():
        if value is None:
            value = "unknown"
        elif isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, float):
            value = f"{value:.6f}".rstrip("0").rstrip(".") if key.endswith("usd") else f"{value:.1f}"
        value = str(value)
        if not value or any(c.isspace() or c in "\"'=" for c in value):
            value = json.dumps(value)
        out.append(f"{key}={value}")
    return " ".join(out)


def known(**facts: Any) -> dict[str, Any]:
    """Only the facts that are known (not None): what an answer cannot vouch for is left out, not guessed."""
    return {k: v for k, v in facts.items() if v is not None}
