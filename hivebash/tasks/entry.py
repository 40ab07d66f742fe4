"""`TaskEntry`: one per known task, the task and what the registry knows of it while it lives in memory.

Every field is written by `registry.LockedTasks` alone, with the registry's lock held; dropping a task is
dropping its entry: no other collection keyed by its id is left to clear.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from common.process_seam import ProcInfo
from hivebash.tasks.task import Task

if TYPE_CHECKING:
    from hivebash.processes.runner import TaskRunner


@dataclass(eq=False)
class TaskEntry:
    """One task and its runtime state (none of this is persisted)."""

    task: Task
    runner: TaskRunner | None = None  # set from the moment it is taken from the queue until its end is handled
    inline_waiters: int = 0  # calls waiting inline for its end: they deliver the result, not a todo
    seen: bool = False  # the agent has read its terminal result: no completion todo
    todo_open: bool = False  # a todo for it is on the agent's board
    leftovers: list[ProcInfo] = field(default_factory=list)  # its processes alive after it ended
    # Where the agent has been shown each stream up to (byte offsets), for status(new_only): moved by the
    # agent's tails and new_only answers, never by an operator's.
    seen_to: dict[str, int] = field(default_factory=dict)
    spawn_waiters: int = 0  # `run(wait_seconds=0)` calls waiting a moment for the spawn, to answer `running`
    # `run` answered "started": the "running" todo goes out if the task still runs after
    # runner.RUNNING_RECORD_DELAY (Lifecycle.on_still_running); one that ends sooner gets only its completion.
    running_todo_due: bool = False
    # Why its terminal record could not be written (a full disk): every answer and the todo say so, and the
    # housekeeper tries again (Lifecycle.retry_unsaved). None: its end is saved, or it has not ended.
    unsaved: str | None = None
    # Its outputs' sizes at the end (Lifecycle.on_ended took them): an answer whose wait saw the end shows the
    # output up to there without a stat of its own (Answers.wait).
    end_sizes: dict[str, int] | None = None
    # A client tracking it as an MCP task (Task.client_handle): when it last polled (monotonic) and the interval
    # it was told, so its end's todo can wait for that poll (AgentSide.todo_completion); whether the completion
    # todo is held for it now; and, once a poll returned the end, whether the model had been shown it before.
    client_tracks: bool = False  # asked for by a client of the extension: no "running" todo (AgentSide)
    client_polled_at: float | None = None
    client_poll_interval: float = 0.0
    todo_held: bool = False
    client_saw_before: bool | None = None
    # The wait for input (processes/input_watch.Asking.key) the agent was last told of, by an answer or a todo:
    # a todo goes out once per wait. `asking_todo`: the todo on the agent's board is that "waits for input" one.
    told_asking: tuple | None = None
    asking_todo: bool = False

    @property
    def id(self) -> str:
        return self.task.id
