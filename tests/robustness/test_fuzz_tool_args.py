"""Property tests of tool-argument validation (common.tools) with the echo tool's schema, in process.

Whatever the arguments, a call is either accepted and answered, or refused with a ToolArgumentsError that names
the field: a handler must never see a value its schema did not promise (it would crash with a TypeError).
"""

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))

from common.tools import ToolArgumentsError, ToolRegistry, validate_arguments  # noqa: E402
from echo_server import ECHO_SCHEMA, TOOLS  # noqa: E402

FUZZ = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
REGISTRY = ToolRegistry([t for t in TOOLS if t.name in ("echo", "refuse", "crash")])

json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                          max_leaves=10)
near_echo_args = st.fixed_dictionaries({}, optional={
    "text": st.text(max_size=30) | st.just("y" * 1000) | st.just("y" * 1001) | json_value,
    "times": st.integers(-2, 8) | st.sampled_from([1.0, 2.0, 5.0, 2.5, True, False, "2", 10**30, float("inf"), float("nan")]) | json_value,
}) | st.dictionaries(st.text(max_size=8), json_value, max_size=4)


@FUZZ
@given(args=near_echo_args | json_value)
def test_echo_arguments_are_accepted_or_refused_by_field(args):
    try:
        result = REGISTRY.call("echo", args)
    except ToolArgumentsError as exc:
        message = str(exc)
        assert any(f in message for f in ("text", "times", "arguments")), f"refusal names no field: {message}"
        assert any(rule in message for rule in ("must", "is required", "not allowed")), f"refusal names no rule: {message}"
        return
    assert not result.is_error, f"accepted arguments {args!r} made the handler fail: {result.text}"
    assert result.text.startswith("echo=") and result.data["echo"] == args["text"] * args.get("times", 1)


@pytest.mark.parametrize("whole_float", [1.0, 2.0, 5.0])
def test_a_whole_float_is_not_an_integer(whole_float):
    """Regression: JSON Schema counts 2.0 as an integer, so `times: 2.0` passed validation and the handler's
    `text * times` raised TypeError ("can't multiply sequence by non-int of type 'float'"), an internal error.
    Integer fields now take only JSON integers; the refusal names the field and the rule."""
    with pytest.raises(ToolArgumentsError, match="times: must be of type integer"):
        validate_arguments(ECHO_SCHEMA, {"text": "a", "times": whole_float})
    assert validate_arguments(ECHO_SCHEMA, {"text": "a", "times": 2}) == {"text": "a", "times": 2}


@FUZZ
@given(args=json_value)
def test_argument_free_tools_refuse_any_argument_by_name(args):
    """refuse and crash take no arguments: anything but {} / null is refused naming `arguments`."""
    for name in ("refuse", "crash"):
        try:
            result = REGISTRY.call(name, args)
        except ToolArgumentsError as exc:
            assert "arguments" in str(exc) or "not allowed" in str(exc), str(exc)
            continue
        assert args in (None, {}), f"{name} accepted {args!r}"
        assert result.is_error and result.text.strip(), "refuse/crash always answer with an error that says something"
