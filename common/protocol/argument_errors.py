"""The refusal of a call's arguments (`ToolArgumentsError`, its message naming each field and its rule) and the
one check every call's arguments get, whichever judged their schema: text UTF-8 can encode."""

from typing import Any


class ToolArgumentsError(ValueError):
    """The arguments do not match the tool's input schema; the message names the field and the rule."""


def check_encodable(value: Any, where: str) -> None:
    """Refuse text UTF-8 cannot encode: JSON's \\ud800 escapes decode to lone surrogates, which would fail
    later, deep in a tool (a command line, a file name, a todo), as an internal error."""
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ToolArgumentsError(f"{where or 'arguments'}: holds text that is not valid Unicode (a lone "
                                         f"surrogate at character {exc.start}); send valid UTF-8 text") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            if not (type(key) is str and key.isascii()):  # ASCII names and values (most calls) need no call
                check_encodable(key, f"{where} key" if where else "argument name")
            if not (type(item) is str and item.isascii()) and isinstance(item, (str, dict, list)):
                check_encodable(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_encodable(item, f"{where}[{index}]")
