"""What `hive-bash top` and `hive-subagent top` share: the daemon's calls in flight (read from its /metrics,
behind the same token as /mcp), a table of fixed columns, and the loop that draws a frame every interval
(`--once`: one frame; `--json`: one JSON object a frame, a line each)."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear the screen: a live frame replaces the last one


def metrics_url(mcp_url: str) -> str:
    return mcp_url.rsplit("/mcp", 1)[0] + "/metrics"


def calls_in_flight(mcp_url: str, token: str | None, namespace: str, timeout: float = 5.0) -> dict[str, Any]:
    """{"calls": {tool: count}, "oldest_seconds": {tool: s}} of the tools with a call being answered now, or
    {"unavailable": why} (metrics off, or no answer)."""
    request = urllib.request.Request(metrics_url(mcp_url), headers={"Authorization": f"Bearer {token}"} if token
                                     else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as exc:
        return {"unavailable": f"/metrics answered {exc.code}" + (" (--metrics off)" if exc.code == 404 else "")}
    except (urllib.error.URLError, OSError) as exc:
        return {"unavailable": f"/metrics: {getattr(exc, 'reason', exc)}"}
    counts = _by_tool(text, f"{namespace}_tool_calls_in_flight")
    oldest = _by_tool(text, f"{namespace}_tool_call_oldest_in_flight_seconds")
    busy = {tool: int(n) for tool, n in counts.items() if n}
    return {"calls": busy, "oldest_seconds": {tool: round(oldest.get(tool, 0.0), 1) for tool in busy}}


def _by_tool(text: str, name: str) -> dict[str, float]:
    """The samples `name{tool="x"} value` of a Prometheus text page (our own page: one label, no escapes)."""
    found: dict[str, float] = {}
    prefix = name + '{tool="'
    for line in text.splitlines():
        if line.startswith(prefix):
            labels, _, value = line.rpartition(" ")
            found[labels[len(prefix):].split('"', 1)[0]] = float(value)
    return found


def in_flight_line(calls: dict[str, Any]) -> str:
    if "unavailable" in calls:
        return f"calls in flight: unknown ({calls['unavailable']})"
    if not calls["calls"]:
        return "calls in flight: none"
    parts = [f"{tool} x{n} (oldest {calls['oldest_seconds'][tool]:g}s)" for tool, n in sorted(calls["calls"].items())]
    return "calls in flight: " + ", ".join(parts)


def table(head: Sequence[str], rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset()) -> str:
    """Columns as wide as their widest cell; the columns in `right` (numbers) are right-aligned."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join([line(head), *(line(r) for r in rows)])


def run_frames(sample: Callable[[], dict[str, Any]], render: Callable[[dict[str, Any]], str], *, once: bool,
               as_json: bool, interval: float, echo: Callable[[str], None]) -> None:
    """Draw frames until Ctrl-C: each `sample()` is one frame (it may take `interval` itself, to measure
    rates); `render` makes its text. A live frame on a terminal replaces the last one."""
    live = not once and not as_json and sys.stdout.isatty()
    try:
        while True:
            frame = sample()
            text = json.dumps(frame) if as_json else render(frame)
            echo((CLEAR if live else "") + text + ("" if as_json or once else "\n"))
            if once:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        return
