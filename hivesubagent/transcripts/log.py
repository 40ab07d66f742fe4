"""A session's transcript as readable turns, for `hive-subagent log` (read from disk, no daemon needed).

One turn starts at each prompt (sessions.is_prompt); inside it, the assistant's text, its tool calls, the
tool results (shortened), API errors and interruptions, in file order. Claude's bookkeeping entries
(attachments, api-request shapes, cost-state, titles) are not shown.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from common.humanize import cut
from hivesubagent.answers.pages import Page, page
from hivesubagent.transcripts.transcript import INTERRUPT_MARK, is_prompt, iter_entries, text_of

TOOL_INPUT_CHARS = 300
TOOL_RESULT_CHARS = 500


@dataclass
class Item:
    kind: str  # text | tool_use | tool_result | error | interrupted
    text: str


@dataclass
class LoggedTurn:
    number: int
    prompt: str
    timestamp: str | None
    items: list[Item] = field(default_factory=list)


def _tool_result_text(block: dict) -> str:
    content = block.get("content")
    return content if isinstance(content, str) else text_of(content)


def read_turns(path: Path) -> list[LoggedTurn]:
    turns: list[LoggedTurn] = []
    with open(path, "rb") as f:
        for entry in iter_entries(f):
            if is_prompt(entry):
                turns.append(LoggedTurn(len(turns) + 1, text_of(entry["message"]["content"]), entry.get("timestamp")))
            elif turns:
                turns[-1].items.extend(_items(entry))
    return turns


def _items(entry: dict) -> Iterator[Item]:
    kind = entry.get("type")
    if entry.get("isSidechain") or kind not in ("user", "assistant"):
        return
    content = (entry.get("message") or {}).get("content")
    if kind == "assistant" and entry.get("isApiErrorMessage"):
        yield Item("error", text_of(content))
        return
    if kind == "user" and text_of(content).startswith(INTERRUPT_MARK):
        yield Item("interrupted", text_of(content))
        return
    if kind == "assistant" and (entry.get("message") or {}).get("model") == "<synthetic>":
        return
    for block in content if isinstance(content, list) else [{"type": "text", "text": content or ""}]:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and kind == "assistant" and block.get("text"):
            yield Item("text", block["text"])
        elif block.get("type") == "tool_use":
            args = json.dumps(block.get("input"), ensure_ascii=False)
            yield Item("tool_use", f"{block.get('name')}({cut(args, TOOL_INPUT_CHARS)})")
        elif block.get("type") == "tool_result":
            mark = " (error)" if block.get("is_error") else ""
            yield Item("tool_result", cut(_tool_result_text(block), TOOL_RESULT_CHARS) + mark)


def render(turns: list[LoggedTurn]) -> str:
    out: list[str] = []
    for turn in turns:
        out.append(f"=== turn {turn.number}" + (f" ({turn.timestamp})" if turn.timestamp else "") + " ===")
        out += ["> " + line for line in turn.prompt.splitlines() or [""]]
        for item in turn.items:
            if item.kind == "text":
                out.append(item.text)
            elif item.kind == "tool_use":
                out.append(f"-> {item.text}")
            elif item.kind == "tool_result":
                out += [f"<- {line}" for line in item.text.splitlines() or [""]]
            else:
                out.append(f"!! {item.kind}: {item.text}")
        out.append("")
    return "\n".join(out).rstrip("\n")


def as_data(turns: list[LoggedTurn]) -> list[dict[str, Any]]:
    return [asdict(t) for t in turns]


def last_turn_page(path: Path, offset: int) -> tuple[int | None, Page]:
    """The transcript's last turn, rendered as `render` does, from character `offset` (a page of it): for
    status(name, steps=true). Raises OffsetError past the end."""
    try:
        turns = read_turns(path)
    except OSError:
        turns = []  # a turn whose claude has not written its transcript yet
    text = render(turns[-1:]) if turns else "(no step yet: claude has not written this turn's prompt to its transcript)"
    return (turns[-1].number if turns else None), page(text, offset)

