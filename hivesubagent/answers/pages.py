"""A turn's result text in pages the model can read whole: bounded in UTF-8 bytes, addressed in characters.

Offsets count characters (what a model can carry from one answer to the next call); a page ends where its
UTF-8 encoding would pass PAGE_BYTES, so the answer around it (a first line of facts, the transcript path,
the how-to-go-on line: under 1 KiB) stays under 8 KiB whatever the script of the text.
"""

from __future__ import annotations

from dataclasses import dataclass

from hivesubagent.answers.shapes import PageData

PAGE_BYTES = 6 * 1024
EXCERPT_BYTES = 3 * 1024  # the start of a result shown in a todo or a plain status, beside the turn's facts


class OffsetError(ValueError):
    """An offset past the end of the text; the message names the field and the text's length."""


@dataclass(frozen=True)
class Page:
    text: str
    offset: int
    total_chars: int

    @property
    def next_offset(self) -> int | None:
        end = self.offset + len(self.text)
        return end if end < self.total_chars else None

    def as_dict(self) -> PageData:
        return {"offset": self.offset, "chars": len(self.text), "total_chars": self.total_chars,
                "next_offset": self.next_offset, "text": self.text}


def _fit(text: str, max_bytes: int) -> int:
    """How many leading characters of `text` encode to at most `max_bytes` UTF-8 bytes."""
    if len(text) * 4 <= max_bytes:
        return len(text)
    used = 0
    for count, char in enumerate(text):
        used += len(char.encode("utf-8", "surrogatepass"))
        if used > max_bytes:
            return count
    return len(text)


def page(text: str, offset: int = 0, max_chars: int | None = None, max_bytes: int = PAGE_BYTES) -> Page:
    """The part of `text` from character `offset`: at most `max_chars` characters and `max_bytes` bytes."""
    if offset < 0 or offset > len(text):
        raise OffsetError(f"result_offset: {offset} is past the end (the result has {len(text)} characters)")
    window = text[offset : offset + (max_bytes if max_chars is None else min(max_chars, max_bytes))]
    return Page(window[: _fit(window, max_bytes)], offset, len(text))


def excerpt(text: str, max_chars: int) -> Page:
    """The start of a result, as a todo or a plain status shows it."""
    return page(text, 0, max_chars, EXCERPT_BYTES)


def read_on(name: str, next_offset: int | None, total_chars: int) -> str:
    """The line that tells the model how to read the rest (empty when nothing is left)."""
    if next_offset is None:
        return ""
    return (f'{total_chars - next_offset} more characters: status(name="{name}", result_offset={next_offset}) '
            f"reads on, a page of up to {PAGE_BYTES // 1024} KiB at a time")
