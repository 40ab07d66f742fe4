"""What a `status` asks to see (`ViewRequest`, checked by hivebash/verbs/requests.py), and the view it renders."""

from __future__ import annotations

from dataclasses import dataclass

from hivebash.output_views.grep_view import grep
from hivebash.output_views.reading import VIEW_BUDGET, Source, View
from hivebash.output_views.tail_view import tail
from hivebash.output_views.window_view import window

STREAMS = ("stdout", "stderr")
DEFAULT_MAX_LINES = 40


@dataclass(frozen=True)
class ViewRequest:
    """The view a `status` asks for (checked): at most one of grep / from_line (negative: from the end) /
    new_only / tail_lines; stream for any."""

    grep: str | None = None
    context: int = 0
    from_line: int | None = None
    max_lines: int = DEFAULT_MAX_LINES
    stream: str | None = None
    new_only: bool = False
    tail_lines: int | None = None  # the tail as its last N lines of each stream (within the answer's bound)

    @property
    def moves_cursor(self) -> bool:
        """Tails and new_only show the end of the output: the agent has then seen it up to there."""
        return self.grep is None and self.from_line is None

    @property
    def plain_tail(self) -> bool:
        """The default view: the tails (of a few lines, perhaps), not grep, a window or what is new."""
        return self.grep is None and self.from_line is None and not self.new_only

    def streams(self) -> tuple[str, ...]:
        return (self.stream,) if self.stream else STREAMS


def render(sources: list[Source], request: ViewRequest, seen_to: dict[str, int] | None = None,
           budget: int = VIEW_BUDGET, tail_cap: int | None = None, task_id: str | None = None) -> View:
    """The view `request` asks for over `sources` (already narrowed to its streams). `seen_to`: where the
    agent was shown each stream up to (for new_only)."""
    if request.grep is not None:
        return grep(sources, request.grep, request.context, budget=budget)
    if request.from_line is not None:
        return window(sources, request.from_line, request.max_lines, budget=budget)
    again = f'status(id="{task_id}", new_only=true)' if task_id else "new_only=true again"
    return tail(sources, dict(seen_to or {}), request.new_only, budget=budget,
                cap=None if request.tail_lines else tail_cap, lines=request.tail_lines, again=again)
