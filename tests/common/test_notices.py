"""The rule for texts that promise a notice: the quick test before the search must never hide a match."""

import pytest

from common.notices import _PROMISE, Notices, promises_a_notice


@pytest.mark.parametrize("text", [
    "its completion then arrives as a todo", "TODOS pile up", "a ToDo", "call get_loose_ends",
    "a Loose End", "a looſe end",  # U+017F, long s: IGNORECASE matches it as s, casefold makes it s
    "todo.", "(todos)",
])
def test_a_text_that_speaks_of_a_todo_is_found(text):
    assert _PROMISE.search(text) is not None
    assert promises_a_notice(text)


@pytest.mark.parametrize("text", [
    "", "check a later end with status", "todolist", "mastodon", "a loose thread", "loosen it", "It keeps running.",
])
def test_a_text_that_does_not_is_passed(text):
    assert _PROMISE.search(text) is None
    assert not promises_a_notice(text)


def test_a_daemon_without_a_socket_refuses_a_text_that_promises():
    quiet = Notices(False)
    assert quiet.say("arrives as a todo", "check it with status") == "check it with status"
    with pytest.raises(ValueError, match="promises a todo"):
        quiet.say("arrives as a todo", "a Todo will come")
    assert Notices(True).say("arrives as a todo", "a Todo will come") == "arrives as a todo"
