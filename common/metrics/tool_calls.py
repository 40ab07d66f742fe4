"""Tool calls by tool and outcome, their latency, and the calls in flight (`ToolCallMetrics`, which
`ToolRegistry.call` tells of each call's start and end)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterable, Sequence

from common.metrics.families import Family, gauge
from common.metrics.registry import MetricsRegistry

# ok: answered; error: an isError result (a refusal, or a handler's unexpected failure: internal_error);
# invalid_arguments: the arguments broke the tool's schema (also isError, the model corrects itself).
OUTCOMES = ("ok", "error", "invalid_arguments", "internal_error")


class ToolCallMetrics:
    def __init__(self, registry: MetricsRegistry, tools: Sequence[str]):
        self.calls = registry.counter("tool_calls_total", "Tool calls answered, by tool and outcome.",
                                      ("tool", "outcome"))
        self.seconds = registry.histogram("tool_call_duration_seconds",
                                          "Time from a tool call's validated arguments to its result (inline "
                                          "waits included).", ("tool",))
        for tool in tools:
            self.seconds.seed(tool)
            for outcome in OUTCOMES:
                self.calls.seed(tool, outcome)
        self._tools = tuple(tools)
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._in_flight: dict[int, tuple[str, float]] = {}
        registry.collect(self._collect)

    def began(self, tool: str) -> int:
        """A call of `tool` starts; the number to end it with."""
        call = next(self._ids)
        with self._lock:
            self._in_flight[call] = (tool, time.monotonic())
        return call

    def ended(self, call: int, outcome: str) -> None:
        with self._lock:
            tool, started = self._in_flight.pop(call)
        self.calls.inc(tool, outcome)
        self.seconds.observe(time.monotonic() - started, tool)

    def in_flight(self) -> list[tuple[str, float]]:
        """(tool, seconds so far) of each call being answered now, the oldest first."""
        now = time.monotonic()
        with self._lock:
            return [(tool, now - started) for tool, started in self._in_flight.values()]

    def _collect(self) -> Iterable[Family]:
        counts = dict.fromkeys(self._tools, 0)
        oldest = dict.fromkeys(self._tools, 0.0)
        for tool, seconds in self.in_flight():
            counts[tool] = counts.get(tool, 0) + 1
            oldest[tool] = max(oldest.get(tool, 0.0), seconds)
        name = self.calls.name.removesuffix("_calls_total")
        yield gauge(f"{name}_calls_in_flight",
                    "Tool calls being answered now (an inline wait holds its call), by tool.",
                    [((("tool", tool),), n) for tool, n in counts.items()])
        yield gauge(f"{name}_call_oldest_in_flight_seconds",
                    "How long the oldest call being answered now has taken so far (0: none), by tool.",
                    [((("tool", tool),), s) for tool, s in oldest.items()])
