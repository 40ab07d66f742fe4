"""The shapes of what the subagent tools and todos answer: the JSON data beside each text, typed for mypy.

Each answer is a plain dict at run time (its JSON is the data the caller gets, key order as built in views.py
and engine.py), declared here as a TypedDict so a misspelt or renamed key is a type error where it is written
or read (views.py builds them, texts.py renders them), not a KeyError in a call. They are `final` so that
`"turn" in view` tells a running turn's view from a session read from its transcript.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict, final


@final
class ProgressData(TypedDict):
    """A running turn's progress so far (progress.Progress.view)."""

    steps: int
    tool_calls: int
    tools: dict[str, int]  # tool name -> calls, most called first
    latest_tool: str | None
    latest_tool_input: str | None
    input_tokens: int | None  # None: claude reported no usage yet
    output_tokens: int | None
    idle_s: float
    last_event: str


@final
class WorkData(TypedDict):
    """What a turn did (turns.work.TurnWork.as_dict)."""

    files_changed: int
    files: list[str]
    files_more: int
    commands_run: int
    last_commands: list[str]


@final
class Bounds(TypedDict):
    """The caps in force for a turn; None: no cap."""

    max_budget_usd: float | None
    max_turns: int | None
    timeout_minutes: float | None


@final
class OutcomeExtras(TypedDict, total=False):
    """What claude's result line said beyond the outcome, when it said it (views.OUTCOME_EXTRA_FIELDS)."""

    terminal_reason: Any
    api_error_status: Any
    num_turns: Any


@final
class Outcome(TypedDict):
    """How a turn of this daemon's ended (views.outcome_data)."""

    outcome: str
    detail: str
    exited_without_result: bool
    returncode: int | None
    result_text: str
    result_chars: int
    result_next_offset: int | None
    cost_usd: float | None
    total_cost_usd: float | None
    max_budget_usd: float | None
    max_turns: int | None
    timeout_minutes: float | None
    duration_s: float
    work: WorkData | None
    terminal_reason: NotRequired[Any]
    api_error_status: NotRequired[Any]
    num_turns: NotRequired[Any]


@final
class StopWait(TypedDict):
    """How interrupt's wait for the end went (engine.SubagentEngine.interrupt)."""

    seconds: float  # the window: the grace (soft) plus the time an exit takes to be recorded
    waited: float
    skipped: bool  # every inline-wait slot was taken: answered at once, without waiting
    kill_grace: float | None  # a soft interrupt: SIGKILL follows this long after the SIGINT; None: SIGKILL was sent


@final
class FileStat(TypedDict):
    """One file of a worktree's diff; None counts: a binary file."""

    file: str
    insertions: int | None
    deletions: int | None


@final
class WorktreeData(TypedDict):
    """A session's worktree (places.worktrees): where, on which branch, from which commit; once measured (a
    turn's end, status(name)) what is in it against that base: commits made, the diff as a stat (bounded), or
    `error` when git could not tell."""

    path: str
    branch: str
    base: str
    repo: str
    commits: NotRequired[int]
    last_commits: NotRequired[list[str]]
    files_changed: NotRequired[int]
    insertions: NotRequired[int]
    deletions: NotRequired[int]
    files: NotRequired[list[FileStat]]
    files_more: NotRequired[int]
    error: NotRequired[str]


class PlaceData(TypedDict, total=False):
    """Where a session runs, as views.place_data gives it (the same keys in TurnView and SessionView)."""

    cwd: str
    worktree: WorktreeData
    options: dict[str, Any]


@final
class TurnView(TypedDict):
    """A turn this daemon runs (or just ended), as start, continue, interrupt and status answer it."""

    name: str
    state: str  # turn.STARTING, RUNNING, STOPPING or ENDED
    running: bool
    session_id: str
    transcript: str
    kind: str
    turn: int
    pid: int | None
    model: str | None
    started_at: str | None
    elapsed_s: float
    confirmed: bool
    signals: dict[str, str]
    turns_done: int
    total_cost_usd: float | None
    max_budget_usd: float | None
    max_turns: int | None
    timeout_minutes: float | None
    progress: ProgressData
    stall: str | None
    outcome: NotRequired[Outcome]
    archived: NotRequired[list[str]]  # start: the earlier sessions of the name it archived
    wait: NotRequired[StopWait]  # interrupt: how its wait for the end went
    cwd: NotRequired[str]  # a session outside --workdir, or with a worktree or options: where it runs
    worktree: NotRequired[WorktreeData]
    options: NotRequired[dict[str, Any]]  # the tool limits and effort this turn runs with
    client_task: NotRequired[bool]  # an MCP client follows this turn as one of its background tasks


@final
class LastTurn(TypedDict):
    """A session's last turn, from its transcript (and this daemon's memory of it, when it ran it)."""

    outcome: str
    exited_without_result: bool
    result_text: str
    result_chars: int
    result_next_offset: int | None
    cost_usd: float | None
    duration_s: float | None
    started_at: str | None
    work: WorkData | None
    detail: NotRequired[str]
    max_budget_usd: NotRequired[float | None]
    max_turns: NotRequired[int | None]
    timeout_minutes: NotRequired[float | None]
    terminal_reason: NotRequired[Any]
    api_error_status: NotRequired[Any]


@final
class PageData(TypedDict):
    """A page of a long text (answers.pages.Page.as_dict)."""

    offset: int
    chars: int
    total_chars: int
    next_offset: int | None
    text: str


@final
class SessionView(TypedDict):
    """A session this daemon is not running, from its transcript."""

    name: str
    state: str  # "finished", or "running" in a claude process this daemon did not start
    running: bool
    session_id: str
    transcript: str
    model: str | None
    turns: int
    total_cost_usd: float | None
    updated_at: str | None
    pid: NotRequired[int]
    started_by: NotRequired[str]
    last_turn: NotRequired[LastTurn]
    result_page: NotRequired[PageData]
    cwd: NotRequired[str]
    worktree: NotRequired[WorktreeData]
    options: NotRequired[dict[str, Any]]  # the session's kept tool limits and effort


SessionAnswer = TurnView | SessionView  # status(name): running here, or read from its transcript


@final
class SessionList(TypedDict):
    """status(): every session, running ones first."""

    sessions: list[SessionAnswer]
    running: int
    more: int  # sessions left out of the list


@final
class WaitFacts(TypedDict):
    """How a status wait went (waits.WaitOutcome.as_dict)."""

    asked: float
    seconds: float
    capped: bool
    waited: float
    skipped: bool
    all: bool
    ended: list[str]


@final
class WaitedSessions(TypedDict):
    """status(names=[...], wait_seconds=N): each session after the wait, and how it went."""

    sessions: list[SessionAnswer]
    wait: WaitFacts


@final
class Steps(TypedDict):
    """status(name, steps=true): a page of the last turn's steps."""

    name: str
    running: bool
    turn: int | None  # None: the transcript holds no turn yet
    transcript: str
    steps_page: PageData
