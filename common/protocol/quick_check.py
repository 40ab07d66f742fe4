"""A quick yes for tool arguments that certainly satisfy their schema, so the common call skips jsonschema.

jsonschema walks every keyword through its validator machinery: a quarter of a tools/call's Python time for a
call with a few fields (docs/performance.md, "Measurements behind the code"). The tools' schemas are flat objects whose
properties use a handful of keywords; for such a schema `compile_quick_check` builds a plain function that
answers True only when jsonschema would report no error. A schema with anything else (another keyword, a
nested schema, a list of types, a non-string enum) gets None and always goes through jsonschema, and so does
every call the quick check does not pass: jsonschema then names each bad field. The two are compared on
generated arguments by tests/robustness/test_fuzz_tool_args.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "deprecated", "readOnly",
                         "writeOnly"})
OBJECT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties"}) | ANNOTATIONS
ARRAY_KEYWORDS = frozenset({"type", "items", "minItems", "maxItems", "uniqueItems"}) | ANNOTATIONS
PROPERTY_KEYWORDS = frozenset({"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
                               "maxLength", "pattern", "enum"}) | ANNOTATIONS


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:  # as common.protocol.tools._is_json_integer: 2.0 is not an integer
    return isinstance(value, int) and not isinstance(value, bool)


TYPES: dict[str, Check] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool),
}


def compile_quick_check(schema: Any) -> Callable[[dict[str, Any]], bool] | None:
    """A function that says True only for arguments `schema` accepts; None if the schema is beyond it."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or not set(schema) <= OBJECT_KEYWORDS:
        return None
    closed = schema.get("additionalProperties", True)
    required = schema.get("required", [])
    properties = schema.get("properties", {})
    if closed not in (True, False) or not isinstance(required, list) or not isinstance(properties, dict):
        return None
    checks: dict[str, Check] = {}
    for name, sub in properties.items():
        check = _compile_property(sub)
        if check is None:
            return None
        checks[name] = check
    return _object_check(checks, tuple(required), additional_allowed=closed is True)


def _object_check(checks: dict[str, Check], required_names: tuple[str, ...], additional_allowed: bool
                  ) -> Callable[[dict[str, Any]], bool]:
    def quick(arguments: dict[str, Any]) -> bool:
        for name in required_names:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            check = checks.get(name)
            if check is None:
                if not additional_allowed:
                    return False
            elif not check(value):
                return False
        return True

    return quick


def _compile_property(sub: Any) -> Check | None:
    if isinstance(sub, dict) and sub.get("type") == "array":
        return _compile_array(sub)
    if not isinstance(sub, dict) or not set(sub) <= PROPERTY_KEYWORDS or "type" not in sub:
        return None
    is_type = TYPES.get(sub["type"]) if isinstance(sub["type"], str) else None
    if is_type is None:
        return None
    checks: list[Check | None] = [is_type]
    if sub["type"] in ("integer", "number"):
        checks += _number_bounds(sub)
    if sub["type"] == "string":
        checks += _string_rules(sub)
    if "enum" in sub:
        allowed = sub["enum"]
        if not isinstance(allowed, list) or not all(isinstance(x, str) for x in allowed):
            return None
        members = frozenset(allowed)
        checks.append(lambda v: isinstance(v, str) and v in members)
    ready = [c for c in checks if c is not None]
    if len(ready) < len(checks):
        return None
    return lambda v: all(check(v) for check in ready)


def _compile_array(sub: dict[str, Any]) -> Check | None:
    """A list of items of one flat schema (bash status `ids`); uniqueness only of strings (as jsonschema
    compares them: plain equality)."""
    low, high, unique = sub.get("minItems", 0), sub.get("maxItems"), sub.get("uniqueItems", False)
    if not set(sub) <= ARRAY_KEYWORDS or not _is_integer(low) or not (high is None or _is_integer(high)):
        return None
    item = _compile_property(sub.get("items"))
    if item is None or not isinstance(unique, bool) or unique and sub["items"].get("type") != "string":
        return None

    def check(value: Any) -> bool:
        return (isinstance(value, list) and low <= len(value) and (high is None or len(value) <= high)
                and all(item(x) for x in value) and (not unique or len(set(value)) == len(value)))

    return check


def _number_bounds(sub: dict[str, Any]) -> list[Check | None]:
    """The comparisons jsonschema makes, written the same way (so NaN passes or fails as it does there)."""
    rules: list[Check | None] = []
    for keyword, fails in _BOUND_FAILS:
        if keyword in sub:
            bound = sub[keyword]
            if not _is_number(bound):
                return [None]
            rules.append(_within(fails, bound))
    return rules


_BOUND_FAILS: tuple[tuple[str, Callable[[Any, Any], bool]], ...] = (
    ("minimum", lambda v, m: v < m), ("maximum", lambda v, m: v > m),
    ("exclusiveMinimum", lambda v, m: v <= m), ("exclusiveMaximum", lambda v, m: v >= m))


def _within(fails: Callable[[Any, Any], bool], bound: Any) -> Check:
    return lambda v: not fails(v, bound)


def _string_rules(sub: dict[str, Any]) -> list[Check | None]:
    rules: list[Check | None] = []
    if "minLength" in sub:
        low = sub["minLength"]
        rules.append((lambda v: not len(v) < low) if _is_integer(low) else None)
    if "maxLength" in sub:
        high = sub["maxLength"]
        rules.append((lambda v: not len(v) > high) if _is_integer(high) else None)
    if "pattern" in sub:
        if not isinstance(sub["pattern"], str):
            return [None]
        search = re.compile(sub["pattern"]).search
        rules.append(lambda v: search(v) is not None)
    return rules
