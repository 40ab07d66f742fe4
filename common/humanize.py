"""Text for people, shared by the tool answers and the CLIs: a command on one line, a long text cut with a
count of what was left out, a long path by its end, an age, a size."""

from __future__ import annotations


def one_line(text: str, limit: int = 80) -> str:
    """`text` with its whitespace runs folded to one space, at most `limit` characters (an ellipsis marks a cut)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def cut(text: str | None, limit: int) -> str:
    """The first `limit` characters of `text`, saying how many more there were."""
    text = text or ""
    return text if len(text) <= limit else text[:limit] + f" ... [{len(text) - limit} more characters]"


def tail(text: str, limit: int) -> str:
    """The end of `text`, at most `limit` characters (an ellipsis marks a cut): a long path's name stays."""
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def human_age(seconds: float) -> str:
    """`42s`, `5m`, `3h`, `2d`: the largest whole unit (rounded down)."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n}B"
