"""The one naming rule, [a-z0-9-]{1,63}, checked before any path is built from a name."""

import pytest

from common.names import NAME_RULE, InvalidName, check_name


@pytest.mark.parametrize("name", ["a", "build", "task-42", "0", "a" * 63, "x-" * 31 + "y"])
def test_valid_names_pass_unchanged(name):
    assert check_name(name, "name") == name


@pytest.mark.parametrize("name,why", [
    ("a" * 64, "64 characters: one too many"),
    ("", "empty"),
    ("..", "path traversal"),
    ("../etc", "path traversal"),
    ("a/b", "path separator"),
    (".hidden", "dot"),
    ("Build", "uppercase"),
    ("build\n", "trailing newline ($ in re.match would accept it)"),
    ("\nbuild", "leading newline"),
    ("build ", "trailing space"),
    ("caf\u00e9", "non-ASCII letter"),
    ("\u0661", "non-ASCII digit (\\d would accept it)"),
    ("a_b", "underscore"),
    ("a\x00b", "NUL"),
])
def test_invalid_names_are_refused(name, why):
    with pytest.raises(InvalidName):
        check_name(name, "name")


def test_message_names_the_field_and_the_rule():
    with pytest.raises(InvalidName) as info:
        check_name("Bad/Name", "task_id")
    message = str(info.value)
    assert message.startswith("task_id: ")
    assert NAME_RULE in message and "'Bad/Name'" in message and "1 to 63" in message


def test_non_string_is_refused_with_the_field():
    for value in (None, 42, ["a"], b"abc"):
        with pytest.raises(InvalidName, match=r"^session: must be a string"):
            check_name(value, "session")


def test_invalid_name_is_a_value_error():
    assert issubclass(InvalidName, ValueError)


def test_huge_value_is_shortened_in_the_message():
    with pytest.raises(InvalidName) as info:
        check_name("A" * 10_000, "name")
    assert len(str(info.value)) < 300 and "..." in str(info.value)
