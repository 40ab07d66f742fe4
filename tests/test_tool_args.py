"""Each tool's arguments TypedDict (what its handler reads, checked by mypy) declares exactly the keys of the
tool's input schema (what the registry validates a call against) and requires exactly the ones the schema
requires, in both daemons: the two declarations sit side by side and must not drift apart. And each tool's
handler reads its own tool's TypedDict (mypy cannot see a handler bound to another tool's schema). And each
engine refuses an argument its verb does not take with its own refusal.

The required keys are read from the annotations (`Required[...]`, `NotRequired[...]`, `total=`), not from
`__required_keys__`: under `from __future__ import annotations` Python 3.11 files every key of a total=False
TypedDict as optional there, `Required` or not.
"""

from __future__ import annotations

from typing import NotRequired, Required, get_origin, get_type_hints

import pytest
from jsonschema import Draft202012Validator

from hivebash import tools as bash
from hivebash.errors import EngineError
from hivebash.verbs import requests as bash_requests
from hivesubagent import requests as subagent_requests
from hivesubagent import tools as subagent
from hivesubagent.errors import SubagentError

ARGS = {
    ("bash", "run"): bash.RunArgs,
    ("bash", "status"): bash.StatusArgs,
    ("bash", "send"): bash.SendArgs,
    ("bash", "kill"): bash.KillArgs,
    ("bash", "list"): bash.ListArgs,
    ("subagent", "start"): subagent.StartArgs,
    ("subagent", "continue"): subagent.ContinueArgs,
    ("subagent", "interrupt"): subagent.InterruptArgs,
    ("subagent", "status"): subagent.SubagentStatusArgs,
}


TOOLS = {(daemon, tool.name): tool  # as each daemon serves them (registries built without an engine)
         for daemon, module in (("bash", bash), ("subagent", subagent))
         for tool in module.build_registry(None).tools()}
SCHEMAS = {key: tool.input_schema for key, tool in TOOLS.items()}


def _handler_reads(tool) -> type:
    """The `args` type of the function a daemon bound as the tool's handler (the engine and the function are
    what its wrapper closes over)."""
    bound = [cell.cell_contents for cell in tool.handler.__closure__ or ()
             if callable(cell.cell_contents) and "args" in getattr(cell.cell_contents, "__annotations__", {})]
    assert len(bound) == 1, f"{tool.name}: cannot find the function its handler wraps"
    from hivebash.engine import Engine  # the handlers' engine type is imported for annotations only
    from hivesubagent.engine import SubagentEngine

    return get_type_hints(bound[0], localns={"Engine": Engine, "SubagentEngine": SubagentEngine})["args"]


def _keys(typed_dict: type) -> tuple[set[str], set[str]]:
    """(every key, the required keys) of a TypedDict, from its annotations."""
    hints = get_type_hints(typed_dict, include_extras=True)
    total = typed_dict.__total__
    required = {key for key, hint in hints.items()
                if get_origin(hint) is Required or (total and get_origin(hint) is not NotRequired)}
    return set(hints), required


def test_every_tool_has_its_arguments_typeddict_and_its_handler_reads_that_one():
    assert set(ARGS) == set(SCHEMAS)
    for key, tool in TOOLS.items():
        assert _handler_reads(tool) is ARGS[key], f"{key}: the handler reads {_handler_reads(tool).__name__}"


@pytest.mark.parametrize("daemon, tool", sorted(SCHEMAS), ids=[f"{d}.{t}" for d, t in sorted(SCHEMAS)])
def test_the_typeddict_declares_the_schemas_keys_and_requires_its_required_ones(daemon, tool):
    schema, typed_dict = SCHEMAS[daemon, tool], ARGS[daemon, tool]
    keys, required = _keys(typed_dict)
    assert keys == set(schema["properties"]), f"{typed_dict.__name__} and {daemon}.{tool}'s schema differ in keys"
    assert required == set(schema.get("required", ())), \
        f"{typed_dict.__name__} and {daemon}.{tool}'s schema differ in required keys"


def test_the_key_reading_finds_required_and_optional_keys():
    """The reading above, on a TypedDict of each form (so the test cannot pass by reading nothing)."""
    from typing import TypedDict

    class Open(TypedDict, total=False):
        a: Required[int]
        b: str

    class Closed(TypedDict):
        a: int
        b: NotRequired[str]

    assert _keys(Open) == ({"a", "b"}, {"a"})
    assert _keys(Closed) == ({"a", "b"}, {"a"})


@pytest.mark.parametrize("key", sorted(SCHEMAS), ids="-".join)
def test_each_schema_is_a_json_schema(key):
    """The registry checks a schema only when it first needs jsonschema for it (argument_schema.py, to keep
    jsonschema out of a daemon's start), so every schema the daemons serve is checked here."""
    Draft202012Validator.check_schema(SCHEMAS[key])


@pytest.mark.parametrize(("check", "refusal", "takes"), [
    (bash_requests.check_list, EngineError, "list (it takes state, limit, offset)"),
    (subagent_requests.check_interrupt, SubagentError, "interrupt (it takes name, force)"),
])
def test_each_engine_refuses_an_argument_its_verb_does_not_take_as_its_own_refusal(check, refusal, takes):
    """The engines' own check (for callers that bypass the schemas): the unknown field and the known ones."""
    with pytest.raises(refusal) as refused:
        check({"bogus": 1})
    assert str(refused.value) == f"bogus: not an argument of {takes}"


ENGINE_FIELDS = {
    ("bash", "run"): bash_requests.RUN_FIELDS,
    ("bash", "status"): bash_requests.STATUS_FIELDS,
    ("bash", "send"): bash_requests.SEND_FIELDS,
    ("bash", "kill"): bash_requests.KILL_FIELDS,
    ("bash", "list"): bash_requests.LIST_FIELDS,
    ("subagent", "start"): subagent_requests.START_FIELDS,
    ("subagent", "continue"): subagent_requests.CONTINUE_FIELDS,
    ("subagent", "status"): subagent_requests.STATUS_FIELDS,
}


@pytest.mark.parametrize("key", sorted(ENGINE_FIELDS), ids="-".join)
def test_each_engines_argument_names_are_its_tools_schema_keys(key):
    """The engines' own check of argument names (for callers that bypass the schemas) and the schema the
    registry validates against name the same arguments."""
    assert sorted(ENGINE_FIELDS[key]) == sorted(SCHEMAS[key]["properties"])
