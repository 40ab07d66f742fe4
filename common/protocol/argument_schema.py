"""Tool arguments judged by `jsonschema` against the tool's schema, with an error that names each bad field and
its rule. Imported only when a call's arguments do not pass the quick check (common/protocol/quick_check.py):
jsonschema and its registries are ~45 ms of a daemon's start."""

import difflib
from collections.abc import Mapping
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator
from jsonschema.validators import extend

from common.protocol.argument_errors import ToolArgumentsError, check_encodable


def _is_json_integer(checker: Any, instance: Any) -> bool:
    """Only a JSON integer is an integer. JSON Schema also counts 2.0, which then reached handlers as a float
    where they expect an int (`"x" * 2.0`, `range(2.0)` raise TypeError: an internal error instead of a clear
    refusal; found by tests/robustness/test_fuzz_tool_args.py)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


# types-jsonschema leaves `extend` untyped.
ArgumentValidator = extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_json_integer))


def _field_path(error: jsonschema.ValidationError) -> str:
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        # The missing property is in the message, not the path: "'cmd' is a required property".
        missing = error.message.split("'")[1] if "'" in error.message else "?"
        return f"{path}.{missing}" if path else missing
    if error.validator == "additionalProperties" and not path:
        return "arguments"
    return path or "arguments"


# Rules whose text is a template of the schema's value.
_RULE_TEXT = {
    "minimum": "must be >= {}",
    "exclusiveMinimum": "must be > {}",
    "maximum": "must be <= {}",
    "minLength": "must be at least {} characters",
    "maxLength": "must be at most {} characters",
    "pattern": "must match {}",
    "minItems": "must have at least {} item(s)",
    "maxItems": "must have at most {} items",
}


def _unknown_arguments(error: jsonschema.ValidationError, hints: Mapping[str, str]) -> str:
    """Which arguments are unknown, the known one each was most likely meant as, and the known ones."""
    known = list((error.schema.get("properties") or {}) if isinstance(error.schema, dict) else ())
    given = error.instance if isinstance(error.instance, dict) else {}
    named = []
    for name in sorted(k for k in given if k not in known):
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = hints.get(name) or (f"did you mean {near[0]!r}?" if near else "")
        named.append(f"{name!r}" + (f" ({hint})" if hint else ""))
    return f"unknown argument(s) not allowed: {', '.join(named)}; the known ones: {', '.join(known)}"


def _rule(error: jsonschema.ValidationError, hints: Mapping[str, str]) -> str:
    v, rule = error.validator, error.validator_value
    rule_value: Any = rule  # the schema's value of keyword `v`: a number, a string, a list of them
    if v in _RULE_TEXT:
        return _RULE_TEXT[v].format(rule)
    if v == "required":
        return "is required"
    if v == "type":
        return f"must be of type {rule_value if isinstance(rule_value, str) else ' or '.join(rule_value)}"
    if v == "uniqueItems":
        return "must not name the same item twice"
    if v == "enum":
        return "must be one of " + ", ".join(repr(x) for x in rule_value)
    if v == "additionalProperties" and rule is False:
        return _unknown_arguments(error, hints)
    return error.message


def validate_arguments(schema: dict[str, Any] | Any, arguments: Any,
                       hints: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Return `arguments` if they satisfy `schema` (a JSON schema, or an ArgumentValidator built from one);
    raise ToolArgumentsError naming every bad field."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ToolArgumentsError("arguments: must be an object")
    validator = ArgumentValidator(schema) if isinstance(schema, dict) else schema
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if errors:
        raise ToolArgumentsError("; ".join(f"{_field_path(e)}: {_rule(e, hints or {})}" for e in errors))
    check_encodable(arguments, "")
    return arguments


def argument_validator(schema: dict[str, Any]) -> Any:
    """An ArgumentValidator of `schema`, checked first (jsonschema.SchemaError: it is no JSON schema)."""
    Draft202012Validator.check_schema(schema)
    return ArgumentValidator(schema)
