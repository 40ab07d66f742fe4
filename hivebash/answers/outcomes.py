"""What `run`, `status`, `kill` and `list` answer: consistent snapshots of tasks, and their text and data.

Every result is formatted twice from one view: `text` for the model, a first line of stable key=value facts
and then the output tails verbatim; `data`, the exact structured form for programmatic callers (the CLI's
--json).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.notices import Notices
from common.waiting import WaitWindow
from hivebash import output_views as ov
from hivebash.disk.store import Tail, TaskStore
from hivebash.tasks import task as T
from hivebash.tasks.snapshot import TaskSnapshot

STARTED_LINES = 10  # lines of each stream a `task started` answer shows
STARTED_BYTES = 1500
STARTED_VIEW = ov.ViewRequest(tail_lines=STARTED_LINES)


def read_output(view: TaskSnapshot, store: TaskStore, request: ov.ViewRequest | None = None,
                seen_to: dict[str, int] | None = None, tail_bytes: int | None = None,
                sizes: dict[str, int] | None = None) -> None:
    """Attach the output the answer shows (outside the engine's lock: these are file reads): the tails, or
    the view `request` asks for; `seen_to` is where the agent was shown each stream up to (new_only); `sizes`:
    the files' sizes when already known (taken at the task's end)."""
    task_id = view.task.id
    paths = {"stdout": store.file(task_id, "out"), "stderr": store.file(task_id, "err")}
    wanted = request.streams() if request else ov.STREAMS
    on_tty = view.task.stdin == "tty" and "stderr" in wanted  # stderr went to the terminal: all is in .out
    known = sizes or {}
    dropped = view.task.dropped
    sources = [ov.Source(s, paths[s], known.get(s), ov.Gap.of(dropped, s) if dropped else None) for s in wanted
               if not (on_tty and s == "stderr")]
    if view.task.state == T.PENDING:
        # Nothing has written to a pending task's files (prepare made them empty; no process yet): no reads.
        # Under load each file syscall of a request thread waits for the GIL again when it returns.
        view.output = ov.View("".join(f"--- {s.stream}: empty (not started) ---\n" for s in sources), {"streams": {}})
        view.stdout, view.stderr = store.empty_tail(task_id, "out"), store.empty_tail(task_id, "err")
        return
    request = request or ov.ViewRequest()
    cap = None if request.tail_lines and tail_bytes != STARTED_BYTES else tail_bytes  # tail_lines: the answer's bound
    view.output = ov.render(sources, request, seen_to, tail_cap=cap, task_id=task_id)
    if on_tty:
        view.output.text += TTY_STDERR
    shown = view.output.data["streams"]
    r = view.task.result
    if r is not None and r.exit_code not in (0, None) and request.plain_tail:
        view.failures = ov.failure_lines(sources, {s: got["elided_bytes"] for s, got in shown.items()})
    for stream in ("stdout", "stderr"):
        got = shown.get(stream) if "text" in shown.get(stream, {}) else None
        if got is None:  # not part of this view: its size and path only
            tail = Tail(paths[stream], "", ov.file_size(paths[stream]), 0, ov.file_size(paths[stream]))
        else:
            shown_bytes = got["shown_bytes"]
            tail = Tail(got["path"], got["text"], got["size"], shown_bytes, got["size"] - shown_bytes)
        setattr(view, stream, tail)



TTY_STDERR = "--- stderr: none apart (stdin=tty: the terminal's output, stderr included, is all in stdout) ---\n"


@dataclass
class Outcome:
    """What `run` or `status` answers: the view, and how the inline wait went."""

    view: TaskSnapshot
    window: WaitWindow
    waited: float
    wait_skipped: bool = False  # every wait slot was taken: answered at once
    wait_for: str | None = None  # the regex the wait also watched the output for
    matched: ov.Line | None = None  # the new line that matched it
    matched_id: str | None = None  # the task whose line it was
    truncated: list[str] = field(default_factory=list)  # watched streams found cut below the watch ("id stdout")
    notices: Notices = Notices(True)  # whether completions reach the agent as todos (a harness socket)
    earlier: ov.Line | None = None  # no new line matched wait_for; this one, shown before the call, does
    earlier_id: str | None = None
    first_answer: bool = False  # run's answer: the first about its task (it names cmd and cwd)


@dataclass
class ManyOutcome:
    """What `status(ids=[...])` answers: each task's snapshot, and how the wait went."""

    views: list[TaskSnapshot]
    first: Outcome  # the wait (window, waited, match) and the first task's view
    ended_before: set[str] = field(default_factory=set)  # ids already ended when the call came (they end no wait)
    every: bool = False  # all=true: the wait was for every task to end


@dataclass
class KillOutcome:
    view: TaskSnapshot
    action: str  # "cancelled", "signalled", "leftovers", "nothing"
    message: str
    wait_skipped: bool = False  # every wait slot was taken: answered without its short wait
