"""One claude transcript (`<session-uuid>.jsonl`, one JSON entry a line) folded into what it says about its
session: name, turns, model, cumulative cost, and the last turn's prompt, outcome and answer.

A session's name is the `customTitle` of its last `{"type":"custom-title"}` entry (claude writes one when the
session starts and again at the end of every turn; the last one wins). A `TranscriptReader` is fed entries in
file order and can be fed more later (transcript_index.py keeps one per named transcript and feeds it only
the lines appended since); `snapshot()` reads its state without ending it.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

INTERRUPT_MARK = "[Request interrupted"

# The last turn's outcome as a transcript shows it (TranscriptTurn.outcome): completed, error, interrupted or
# no_result, a prompt with no answer after it: the turn is still running, or its process died without writing
# one (SIGKILL, a crash): counted as interrupted.


def timestamp_of(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def is_prompt(entry: dict) -> bool:
    """A user entry that starts a turn: a prompt, not a tool result, meta note or interruption marker."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isSidechain") or "toolUseResult" in entry:
        return False
    if entry.get("isCompactSummary"):
        return False
    content = (entry.get("message") or {}).get("content")
    if isinstance(content, list):
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return False
        if not any(isinstance(b, dict) and b.get("type") == "text" for b in content):
            return False
    elif not isinstance(content, str):
        return False
    return not text_of(content).startswith(INTERRUPT_MARK)


@dataclass
class TranscriptTurn:
    """The last turn as the transcript records it."""

    prompt: str = ""
    outcome: str = "no_result"
    result_text: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    cost_before_usd: float | None = None
    cost_usd: float | None = None  # this turn's: cumulative after minus cumulative before; None: not recorded
    cost_recorded: bool = False  # claude wrote a cost-state after the prompt (an interrupted turn may not)

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return max(0.0, self.ended_at - self.started_at)


@dataclass
class Transcript:
    """What one transcript file says about its session."""

    path: Path
    session_id: str
    name: str | None = None
    archived: bool = False
    turns: int = 0
    model: str | None = None
    cost_usd: float | None = None  # cumulative over every turn (claude's own cost-state)
    first_at: float | None = None
    last_at: float | None = None
    last_turn: TranscriptTurn | None = None
    mtime: float = 0.0


def session_id_of(path: Path) -> str:
    return path.name.split(".", 1)[0]


def is_archived(path: Path) -> bool:
    return not path.name.endswith(".jsonl")


class TranscriptReader:
    """Transcript entries, fed in file order, folded into a Transcript; more can be fed at any time."""

    def __init__(self, path: Path):
        self.t = Transcript(path=path, session_id=session_id_of(path), archived=is_archived(path))
        self.turn: TranscriptTurn | None = None
        self.last_message_id: str | None = None

    def feed(self, entry: dict) -> None:
        t = self.t
        kind = entry.get("type")
        if kind == "custom-title" and isinstance(entry.get("customTitle"), str):
            t.name = entry["customTitle"]
        stamp = timestamp_of(entry.get("timestamp"))
        if stamp is not None:
            t.first_at = stamp if t.first_at is None else t.first_at
            t.last_at = stamp
        if kind == "cost-state" and isinstance(entry.get("totalCostUSD"), (int, float)):
            t.cost_usd = float(entry["totalCostUSD"])
            if self.turn is not None:
                self.turn.cost_recorded = True
        if is_prompt(entry):
            t.turns += 1
            self.turn = TranscriptTurn(prompt=text_of(entry["message"]["content"]), started_at=stamp,
                                 cost_before_usd=t.cost_usd)
            self.last_message_id = None
            return
        if self.turn is None:
            return
        if stamp is not None:
            self.turn.ended_at = stamp
        if kind == "user" and text_of((entry.get("message") or {}).get("content")).startswith(INTERRUPT_MARK):
            self.turn.outcome = "interrupted"
        elif kind == "assistant":
            self._assistant(entry, self.turn)

    def _assistant(self, entry: dict[str, Any], turn: TranscriptTurn) -> None:
        message = entry.get("message") or {}
        synthetic = message.get("model") == "<synthetic>"
        text = text_of(message.get("content"))
        if entry.get("isApiErrorMessage"):
            turn.outcome, turn.result_text = "error", text
            return
        if synthetic:
            return
        self.t.model = message.get("model") or self.t.model
        if message.get("id") != self.last_message_id:
            self.last_message_id = message.get("id")
            turn.result_text = ""
        if text:
            turn.result_text += text
        if (message.get("stop_reason") in ("end_turn", "stop_sequence", "max_tokens", "refusal")
                and turn.outcome != "interrupted"):
            turn.outcome = "completed"
        elif message.get("stop_reason") == "tool_use":
            turn.outcome = "no_result"

    def snapshot(self, mtime: float = 0.0) -> Transcript:
        """The transcript as read so far (a copy: feeding more later does not change it)."""
        t = copy.copy(self.t)
        t.mtime = mtime
        turn = copy.copy(self.turn)
        if turn is not None and turn.cost_recorded:  # else its cost is unknown (never the earlier turns' 0)
            if turn.cost_before_usd is not None and t.cost_usd is not None:
                turn.cost_usd = max(0.0, t.cost_usd - turn.cost_before_usd)
            elif turn.cost_before_usd is None and t.turns == 1:
                turn.cost_usd = t.cost_usd
        t.last_turn = turn
        return t


def iter_entries(lines: Iterable[bytes]) -> Iterator[dict]:
    for raw in lines:
        try:
            entry = json.loads(raw)
        except ValueError:
            continue  # a torn last line while claude is writing; or a foreign line
        if isinstance(entry, dict):
            yield entry


def read_transcript(path: Path) -> Transcript:
    """Parse one transcript file whole, every entry (raises OSError if it cannot be read)."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        reader = TranscriptReader(path)
        for entry in iter_entries(f):
            reader.feed(entry)
    return reader.snapshot(st.st_mtime)
