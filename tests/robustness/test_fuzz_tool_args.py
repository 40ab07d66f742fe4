"""Property tests of tool-argument validation (common.protocol.tools) with the echo tool's schema, in process.

Whatever the arguments, a call is either accepted and answered, or refused with a ToolArgumentsError that names
the field: a handler must never see a value its schema did not promise (it would crash with a TypeError).
"""


import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kit.echo_server import ECHO_SCHEMA, TOOLS
from kit.fuzz_budget import examples

from common.protocol.argument_errors import ToolArgumentsError
from common.protocol.argument_schema import validate_arguments
from common.protocol.tools import ToolRegistry

FUZZ = settings(max_examples=examples(300), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
REGISTRY = ToolRegistry([t for t in TOOLS if t.name in ("echo", "refuse", "crash")])

json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_value = st.recursive(
    json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10)
near_echo_args = st.fixed_dictionaries({}, optional={
    "text": st.text(max_size=30) | st.just("y" * 1000) | st.just("y" * 1001) | json_value,
    "times": (st.integers(-2, 8) | st.sampled_from([1.0, 2.0, 5.0, 2.5, True, False, "2", 10**30, float("inf"),
                                                      float("nan")])
              | json_value),
}) | st.dictionaries(st.text(max_size=8), json_value, max_size=4)


@FUZZ
@given(args=near_echo_args | json_value)
def test_echo_arguments_are_accepted_or_refused_by_field(args):
    try:
        result = REGISTRY.call("echo", args)
    except ToolArgumentsError as exc:
        message = str(exc)
        assert any(f in message for f in ("text", "times", "arguments")), f"refusal names no field: {message}"
        assert any(rule in message for rule in ("must", "is required", "not allowed")), (
            f"refusal names no rule: {message}")
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


# -- the quick check (common/protocol/quick_check.py) agrees with jsonschema -------------------------------------------

def _real_schemas():
    """Every tool schema the daemons serve, and the echo tool's (registries built without an engine: the
    handlers are never called here)."""
    from common.protocol.quick_check import compile_quick_check
    from hivebash.tools import build_registry as bash_tools
    from hivesubagent.tools import build_registry as subagent_tools

    schemas = [(f"{prefix}.{tool.name}", tool.input_schema)
               for prefix, build in (("bash", bash_tools), ("subagent", subagent_tools))
               for tool in build(None).tools()]
    schemas.append(("echo", ECHO_SCHEMA))
    compiled = [(name, schema, compile_quick_check(schema)) for name, schema in schemas]
    assert all(quick is not None for _, _, quick in compiled), "every served schema should have a quick check"
    return compiled


QUICK = _real_schemas()


def _values_for(prop: dict):
    """Values around a property's rules: its enum, lengths at the bounds, numbers at and past the bounds."""
    near = [json_value]
    if "enum" in prop:
        near.append(st.sampled_from(prop["enum"]))
    if prop.get("type") == "string":
        near.append(st.from_regex(prop["pattern"], fullmatch=True) if "pattern" in prop else st.text(max_size=10))
        if "maxLength" in prop:
            near.append(st.sampled_from(["x" * prop["maxLength"], "x" * (prop["maxLength"] + 1)]))
    for bound in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if bound in prop:
            b = prop[bound]
            near.append(st.sampled_from([b, b - 1, b + 1, b - 0.5, b + 0.5, float(b)]))
    near.append(st.sampled_from([True, False, 0, -1, 2.0, float("nan"), float("inf"), "", "1", None, [], {}]))
    return st.one_of(near)


@pytest.mark.parametrize("name, schema, quick", QUICK, ids=[n for n, _, _ in QUICK])
@FUZZ
@given(data=st.data())
def test_the_quick_check_says_yes_exactly_when_jsonschema_finds_no_error(name, schema, quick, data):
    from common.protocol.argument_schema import ArgumentValidator

    props = schema.get("properties", {})
    chosen = data.draw(st.fixed_dictionaries({}, optional={k: _values_for(p) for k, p in props.items()}))
    if data.draw(st.booleans()):
        chosen.update(data.draw(st.dictionaries(st.text(max_size=6), json_value, max_size=2)))
    valid = not list(ArgumentValidator(schema).iter_errors(chosen))
    assert quick(chosen) == valid, f"{name}: quick check says {quick(chosen)}, jsonschema says {valid} for {chosen!r}"
