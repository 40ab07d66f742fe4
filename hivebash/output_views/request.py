"""What a `status` asks to see: the checked ViewRequest, and the view it renders."""

from __future__ import annotations

from dataclasses import dataclass

from hivebash.output_views.grep_view import compile_pattern, grep
from hivebash.output_views.reading import CONTEXT_MAX, MAX_LINES_MAX, VIEW_BUDGET, Source, View, ViewError
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


def _check_plain_fields(stream: object, new_only: object, tail_lines: object) -> None:
    if stream is not None and stream not in STREAMS:
        raise ViewError('stream: must be "stdout" or "stderr" (omit it for both)')
    if new_only is not None and not isinstance(new_only, bool):
        raise ViewError("new_only: must be true or false")
    if tail_lines is not None and (isinstance(tail_lines, bool) or not isinstance(tail_lines, int)
                                   or not 1 <= tail_lines <= MAX_LINES_MAX):
        raise ViewError(f"tail_lines: must be an integer from 1 to {MAX_LINES_MAX}")


def check_view(grep: str | None = None, context: int | None = None, from_line: int | None = None,
               max_lines: int | None = None, stream: str | None = None, new_only: bool | None = None,
               tail_lines: int | None = None) -> ViewRequest:
    """A ViewRequest, or a ViewError naming the field and the rule. `max_lines` alone reads the last lines.
    Typed as `StatusArgs` has them (hivebash/tools/__init__.py); the type checks below repeat the schema's, so any
    caller gets a ViewError that names the field."""
    _check_plain_fields(stream, new_only, tail_lines)
    chosen = [name for name, value in (("grep", grep), ("from_line", from_line), ("new_only", new_only or None),
                                       ("tail_lines", tail_lines)) if value is not None]
    if len(chosen) > 1:
        raise ViewError(f"{chosen[1]}: cannot be combined with {chosen[0]} (one view per call)")
    if context is not None and grep is None:
        raise ViewError("context: goes with grep (lines around each match)")
    if max_lines is not None and from_line is None and (grep is not None or new_only or tail_lines is not None):
        raise ViewError("max_lines: goes with from_line, or alone for the last lines (not with another view)")
    if max_lines is not None and from_line is None:
        from_line = (-max_lines if isinstance(max_lines, int) and not isinstance(max_lines, bool) and max_lines > 0
                     else 0)
    if grep is not None:
        compile_pattern(grep)
    context = 0 if context is None else context
    if isinstance(context, bool) or not isinstance(context, int) or not 0 <= context <= CONTEXT_MAX:
        raise ViewError(f"context: must be an integer from 0 to {CONTEXT_MAX}")
    max_lines = DEFAULT_MAX_LINES if max_lines is None else max_lines
    if isinstance(max_lines, bool) or not isinstance(max_lines, int) or not 1 <= max_lines <= MAX_LINES_MAX:
        raise ViewError(f"max_lines: must be an integer from 1 to {MAX_LINES_MAX}")
    if from_line is not None and (isinstance(from_line, bool) or not isinstance(from_line, int) or from_line == 0):
        raise ViewError("from_line: must be a non-zero integer (the first line is 1; -20 starts 20 lines from the end)")
    return ViewRequest(grep, context, from_line, max_lines, stream, bool(new_only), tail_lines)


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
