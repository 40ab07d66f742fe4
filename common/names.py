"""The one naming rule for task ids and session names, checked before a name touches a path."""

import re

NAME_RULE = "[a-z0-9-]{1,63}"
_NAME_RE = re.compile(r"[a-z0-9-]{1,63}")


class InvalidName(ValueError):
    """A name broke the rule; the message names the field and the rule."""


def check_name(value: object, field: str = "name") -> str:
    """Return `value` if it is a valid name, else raise InvalidName naming `field` and the rule.

    fullmatch, not match: `re.match` with `$` would accept a trailing newline ("abc\\n").
    """
    if not isinstance(value, str):
        raise InvalidName(f"{field}: must be a string matching {NAME_RULE}")
    if not _NAME_RE.fullmatch(value):
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise InvalidName(
            f"{field}: {shown!r} is not allowed: use only lowercase letters, digits and '-', "
            f"1 to 63 characters ({NAME_RULE})"
        )
    return value
