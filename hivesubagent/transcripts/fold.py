"""Complete transcript lines folded into a TranscriptReader as if every line were parsed and fed, parsing only
the few that can change the summary: a named transcript is mostly tool results, answers of finished turns and
claude's own bookkeeping (attachments, API request records), none of which the summary shows.

What is parsed, of a block of complete lines:
- every user entry that is not a tool result (prompts, interruption markers, meta notes: a tool result counts
  only when it carries the interruption marker), so every turn is counted;
- every assistant entry after the block's last prompt (the current turn's answer and outcome), and before it
  only the last one that names a model (searched back from the prompt);
- the last title (the last one wins), the last cost-state before the last prompt (the turn's cost starts
  there) and the last of all;
- the first stamped line (when the transcript has no first time yet) and the last one (the transcript's and
  the current turn's end).
Which kind a line is, is read from its bytes: `"type":"user"`, `"type":"assistant"`, `"toolUseResult"`,
`"custom-title"` and `"cost-state"` can stand with unescaped quotes only as JSON tokens, never inside a string.
A line matched by mistake (a token nested in another entry) is parsed and fed like any other: no harm.
tests/subagent/test_transcript_index.py checks the result against a whole parse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

from hivesubagent.transcripts.transcript import INTERRUPT_MARK, TranscriptReader, is_prompt, timestamp_of

TITLE = b'"custom-title"'
_COST = b'"cost-state"'
_TOOL_RESULT = b'"toolUseResult"'
_INTERRUPTED = INTERRUPT_MARK.encode()
_USER = re.compile(rb'"type": ?"user"')
_ASSISTANT = re.compile(rb'"type": ?"assistant"')


def parse(raw: bytes) -> dict | None:
    try:
        entry = json.loads(raw)
    except ValueError:
        return None  # a foreign or broken line
    return entry if isinstance(entry, dict) else None


def is_title(entry: dict) -> bool:
    return entry.get("type") == "custom-title" and isinstance(entry.get("customTitle"), str)


def _is_cost(entry: dict) -> bool:
    return entry.get("type") == "cost-state" and isinstance(entry.get("totalCostUSD"), (int, float))


def _names_model(entry: dict) -> bool:
    """An assistant entry that sets the transcript's model (TranscriptReader._assistant's rule)."""
    model = (entry.get("message") or {}).get("model")
    return (entry.get("type") == "assistant" and not entry.get("isApiErrorMessage") and bool(model)
            and model != "<synthetic>")


class _Lines:
    """A block of complete lines (it ends with a newline), each addressed by the offset where it starts."""

    def __init__(self, data: bytes):
        self.data = data

    def end(self, start: int) -> int:
        return self.data.find(b"\n", start)

    def parse(self, start: int) -> dict | None:
        return parse(self.data[start : self.end(start)])

    def has(self, needle: bytes, start: int) -> bool:
        return self.data.find(needle, start, self.end(start)) >= 0

    def matching(self, pattern: re.Pattern | bytes, lo: int, hi: int) -> list[int]:
        """Starts of the lines in [lo, hi) holding `pattern`, one per line, in order."""
        data = self.data
        if isinstance(pattern, re.Pattern):
            find = lambda pos: m.start() if (m := pattern.search(data, pos, hi)) else -1  # noqa: E731
        else:
            find = lambda pos: data.find(pattern, pos, hi)  # noqa: E731
        out, pos = [], lo
        while pos < hi and (at := find(pos)) >= 0:
            out.append(data.rfind(b"\n", 0, at) + 1)
            pos = self.end(at) + 1
        return out

    def last(self, needle: bytes, lo: int, hi: int, wanted: Callable[[dict], bool]) -> tuple[int, dict] | None:
        """The last line in [lo, hi) holding `needle` whose entry is `wanted`, searched from `hi` back."""
        while (at := self.data.rfind(needle, lo, hi)) >= 0:
            start = self.data.rfind(b"\n", 0, at) + 1
            if start >= lo and (entry := self.parse(start)) is not None and wanted(entry):
                return start, entry
            hi = start
        return None

    def forward(self) -> Iterator[int]:
        start = 0
        while start < len(self.data):
            yield start
            start = self.end(start) + 1

    def backward(self) -> Iterator[int]:
        end = len(self.data) - 1
        while end > 0:
            start = self.data.rfind(b"\n", 0, end) + 1
            yield start
            end = start - 1


def fold(reader: TranscriptReader, data: bytes) -> int:
    """Feed the complete lines of `data` to `reader` (see the module docstring for what is skipped); returns
    where the block's last prompt line starts (-1: none), so the index knows where the reader's last turn began."""
    lines = _Lines(data)
    fed: dict[int, dict] = {}
    for start in lines.matching(_USER, 0, len(data)):
        if lines.has(_TOOL_RESULT, start) and not lines.has(_INTERRUPTED, start):
            continue
        if (entry := lines.parse(start)) is not None:
            fed[start] = entry
    prompts = [start for start in sorted(fed) if is_prompt(fed[start])]
    last_prompt = prompts[-1] if prompts else -1
    if reader.turn is not None or prompts:
        after = lines.end(last_prompt) + 1 if prompts else 0
        for start in lines.matching(_ASSISTANT, after, len(data)):
            if (entry := lines.parse(start)) is not None:
                fed[start] = entry
        if prompts:
            turn_from = 0 if reader.turn is not None else prompts[0]
            _take(fed, lines.last(b'"assistant"', turn_from, last_prompt, _names_model))
    _take(fed, lines.last(TITLE, 0, len(data), is_title))
    _take(fed, lines.last(_COST, 0, max(0, last_prompt), _is_cost))
    _take(fed, lines.last(_COST, last_prompt + 1, len(data), _is_cost))
    if reader.t.first_at is None:
        reader.t.first_at = _first_stamp(lines, fed)
    for start in sorted(fed):
        reader.feed(fed[start])
    _take_last_stamp(reader, lines, fed, last_prompt)
    return last_prompt


def _take(fed: dict[int, dict], found: tuple[int, dict] | None) -> None:
    if found is not None:
        fed[found[0]] = found[1]


def _stamp(lines: _Lines, fed: dict[int, dict], start: int) -> float | None:
    entry = fed.get(start) or lines.parse(start)
    return timestamp_of(entry.get("timestamp")) if entry else None


def _first_stamp(lines: _Lines, fed: dict[int, dict]) -> float | None:
    for start in lines.forward():
        if (stamp := _stamp(lines, fed, start)) is not None:
            return stamp
    return None


def _take_last_stamp(reader: TranscriptReader, lines: _Lines, fed: dict[int, dict], last_prompt: int) -> None:
    """The last stamped line, if it was not fed: it ends the transcript, and the current turn if after its prompt."""
    for start in lines.backward():
        stamp = _stamp(lines, fed, start)
        if stamp is None:
            continue
        if start not in fed:
            reader.t.last_at = stamp
            if reader.turn is not None and start > last_prompt:
                reader.turn.ended_at = stamp
        return
