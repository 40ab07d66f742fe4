"""What a running turn has done so far, folded from claude's stream-json lines as they arrive.

Claude 2.1.328 (`-p --output-format stream-json --verbose`) writes one `assistant` line per content block of a
model reply (a text, a tool_use), all carrying that reply's message id, and a `user` line per tool result.
A step is one model reply (a distinct message id). The `usage` on an assistant line is the one the API sent
when the reply began (its output count is not final yet), so token figures run low until the turn ends; the
turn's cost is reported only by the final `result` line, never mid-turn.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from common.humanize import one_line
from hivesubagent.answers.shapes import ProgressData

INPUT_CHARS = 160  # how much of the latest tool call's input status shows
# The input field that says most about a call of claude's built-in tools, in order of preference.
TELLING_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "description", "prompt", "notebook_path")


def short_input(tool_input: Any, limit: int = INPUT_CHARS) -> str:
    """One line that says what a tool call does: its telling field if it has one, else its compact JSON."""
    if isinstance(tool_input, dict):
        for key in TELLING_KEYS:
            if isinstance(tool_input.get(key), str) and tool_input[key].strip():
                text = f"{key}={tool_input[key]}"
                break
        else:
            text = json.dumps(tool_input, ensure_ascii=False, separators=(",", ":"))
    else:
        text = json.dumps(tool_input, ensure_ascii=False)
    return one_line(text, limit)  # one line, whatever the command's newlines


@dataclass
class Progress:
    """Steps, tool calls and tokens of one turn, and when the stream last said anything."""

    steps: int = 0
    tool_calls: Counter = field(default_factory=Counter)
    latest_tool: str | None = None
    latest_input: str | None = None
    last_event_mono: float = field(default_factory=time.monotonic)
    last_event: str = "claude started"  # what the stream last said, for a stall notice ("tool Bash started")
    _usage: dict[str, tuple[int, int]] = field(default_factory=dict)  # message id -> (input, output) tokens
    _last_message_id: str | None = None
    # The reader thread feeds it while status threads read it: the counters are read whole, never mid-change.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def touch(self, what: str | None = None) -> None:
        """A line from claude now; `what` it said, when it is worth naming."""
        self.last_event_mono = time.monotonic()
        if what:
            self.last_event = what

    def assistant(self, message: dict) -> None:
        """One assistant line: a new step when its message id is new; its tool calls; its usage."""
        with self._lock:
            self._assistant(message)

    def _assistant(self, message: dict) -> None:
        message_id = str(message.get("id") or "")
        if not message_id or message_id != self._last_message_id:
            self.steps += 1
            self._last_message_id = message_id or None
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                name = str(block.get("name") or "?")
                self.tool_calls[name] += 1
                self.latest_tool, self.latest_input = name, short_input(block.get("input"))
                self.last_event = f"tool {name} started"
            elif isinstance(block, dict) and block.get("type") == "text":
                self.last_event = "a reply"
        usage = message.get("usage")
        if isinstance(usage, dict) and message_id:
            self._usage[message_id] = (_tokens(usage, "input_tokens", "cache_creation_input_tokens",
                                               "cache_read_input_tokens"),
                                       _tokens(usage, "output_tokens"))

    def view(self) -> ProgressData:
        with self._lock:
            return self._view()

    def _view(self) -> ProgressData:
        reported = bool(self._usage)
        return {
            "steps": self.steps,
            "tool_calls": sum(self.tool_calls.values()),
            "tools": dict(self.tool_calls.most_common()),
            "latest_tool": self.latest_tool,
            "latest_tool_input": self.latest_input,
            "input_tokens": sum(i for i, _ in self._usage.values()) if reported else None,
            "output_tokens": sum(o for _, o in self._usage.values()) if reported else None,
            "idle_s": round(max(0.0, time.monotonic() - self.last_event_mono), 1),
            "last_event": self.last_event,
        }


def _tokens(usage: dict, *keys: str) -> int:
    return sum(int(usage[k]) for k in keys if isinstance(usage.get(k), int) and not isinstance(usage.get(k), bool))
