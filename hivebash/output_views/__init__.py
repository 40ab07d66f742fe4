"""Views of a task's output files for the model: grep, a window of lines, what is new, the tail, wait_for.

Every view reads the files in blocks (never whole: an output may be many GiB), cleans what it shows
(hivebash.output_views.terminal_text: no escape sequences, last carriage-return frame) and fits in a byte budget, so an
answer that carries a view stays under 8 KiB however large the files are. Lines are numbered from 1 and
ended by `\\n`.

The rooms: kept (a file as the views read it: its dropped middle one marker line), reading (types, limits,
block and line reading), line_index (line numbers), line_count (the
lines of a growing file), grep_view, window_view, tail_view, failures (a failed task's error lines),
wait_for, request (what a status asks to see, and its rendering).
"""

from hivebash.output_views.failures import FAILURE_LINES, FAILURE_PATTERN, failure_lines
from hivebash.output_views.grep_view import compile_pattern, grep
from hivebash.output_views.kept import Gap, OutputFile, gap_data, passed_line
from hivebash.output_views.line_index import LineIndex
from hivebash.output_views.reading import (
    BLOCK,
    CONTEXT_MAX,
    GREP_SECONDS,
    LINE_CAP,
    MAX_LINES_MAX,
    VIEW_BUDGET,
    Line,
    Source,
    View,
    ViewError,
    file_size,
)
from hivebash.output_views.request import DEFAULT_MAX_LINES, STREAMS, ViewRequest, render
from hivebash.output_views.tail_view import tail
from hivebash.output_views.wait_for import PromptWatch, Watch, watch
from hivebash.output_views.window_view import window

__all__ = ["FAILURE_LINES", "FAILURE_PATTERN", "failure_lines", "BLOCK", "CONTEXT_MAX", "DEFAULT_MAX_LINES",
           "GREP_SECONDS", "Gap", "LINE_CAP", "MAX_LINES_MAX", "OutputFile", "STREAMS",
           "VIEW_BUDGET", "Line", "LineIndex", "PromptWatch", "Source", "View", "ViewError", "ViewRequest", "Watch",
           "file_size", "gap_data", "passed_line",
           "compile_pattern", "grep", "render", "tail", "watch", "window"]
