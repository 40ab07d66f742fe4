"""The bash daemon's side of the MCP tasks extension (common/protocol/mcp_tasks.py): `run` hands a client that
declared it a task handle for a task still running after the wait, and `BashTaskHandles` answers the client's
`tasks/get` and `tasks/cancel` (hivebash/verbs/client_tasks.py does the work under the registry's lock).

A poll of a running task says its progress line (`running 12 s · 3,412 lines · last: "..."`, as a waiting call's
progress says it), or what it asks while it waits for input (`waiting for input: "Continue [y/N]? "; send(...)`);
the poll that returns the end answers what `status(id)` would, and counts as the model having read it. An end the
model was shown before gets one line saying so: the client turns every end into a turn.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from common.facts import known_kv
from common.protocol.mcp_tasks import (
    Status,
    TaskState,
    UnknownHandle,
    call_tool_result,
    create_task_result,
    poll_interval_ms,
)
from common.protocol.tools import ToolResult
from hivebash.answers.outcomes import Outcome
from hivebash.answers.texts import outcome_result
from hivebash.answers.wait_progress import WaitTelling
from hivebash.processes.input_look import answer_step
from hivebash.tasks.entry import TaskEntry
from hivebash.tasks.task import Task
from hivebash.verbs import client_tasks as verbs

if TYPE_CHECKING:
    from hivebash.engine import Engine

log = logging.getLogger(__name__)
INTERNAL_ERROR = -32603


class BashTaskHandles:
    """`TaskHandles` over one engine's tasks; keeps each running tracked task's progress counter between polls."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._lock = threading.Lock()  # guards _tellings (and each telling's own counters)
        self._tellings: dict[str, tuple[Task, WaitTelling]] = {}

    def hand_out(self, outcome: Outcome) -> ToolResult | None:
        """`run`'s answer as a task (the model reads `modelImmediateResponse` now); None when the task has ended
        meanwhile (then answered as without the extension)."""
        task = outcome.view.task
        handle = verbs.track(self.engine.rooms, task.id)
        if handle is None:
            return None
        result = outcome_result(outcome, started_form=True, client_task=True)
        with self.engine.registry.locked() as tasks:
            entry = tasks.get(task.id)
        state = TaskState("working", task.submitted_at, time.time(), self._ttl_ms(None),
                          poll_interval_ms(time.time() - task.submitted_at), self._progress(entry))
        result.task = create_task_result(handle, state, immediate=result.text)
        return result

    def get(self, handle: str) -> TaskState:
        found = verbs.poll(self.engine.rooms, handle)
        task = found.entry.task
        if not found.ended:
            if task.client_cancelled:
                return self._state(task, "cancelled", message=_stopping(task, self.engine.settings.kill_grace))
            return TaskState("working", task.submitted_at, time.time(), self._ttl_ms(None), found.interval_ms,
                             self._progress(found.entry))
        with self._lock:
            self._tellings.pop(task.id, None)
        if task.client_cancelled:
            return self._state(task, "cancelled", message=f"cancelled: {_summary(task)}")
        try:
            text = _seen_line(task) if found.seen_before else self._status_text(task)
        except Exception as exc:  # the daemon's own failure: the task's end is still what status(id) shows
            log.exception("tasks/get of task %s failed", task.id)
            return self._state(task, "failed", error={"code": INTERNAL_ERROR, "message": f"the bash daemon could not "
                               f"read task {task.id}'s end ({type(exc).__name__}: {exc}); status(id=\"{task.id}\") "
                               "shows it"})
        return self._state(task, "completed", message=_summary(task), result=call_tool_result(text))

    def cancel(self, handle: str) -> None:
        verbs.cancel(self.engine.rooms, handle)

    def known(self, handle: str) -> bool:
        with self.engine.registry.locked() as tasks:
            try:
                verbs.entry_of(tasks, handle)
            except UnknownHandle:
                return False
        return True

    def _status_text(self, task: Task) -> str:
        """What status(id) answers the agent (so the end counts as read: its todo goes, new_only moves on)."""
        outcome = self.engine.status(task.id)
        assert isinstance(outcome, Outcome)  # one id: one task's outcome
        return outcome_result(outcome, started_form=False).text

    def _state(self, task: Task, status: Status, message: str | None = None, result: dict | None = None,
               error: dict | None = None) -> TaskState:
        ended_at = task.result.ended_at if task.result else None
        return TaskState(status, task.submitted_at, ended_at or time.time(), self._ttl_ms(ended_at), None,
                         message, result, error)

    def _ttl_ms(self, ended_at: float | None) -> int:
        """Until retention may prune it: --keep-days after its end (--keep-tasks may prune it sooner)."""
        keep = self.engine.settings.keep_days * 86400.0
        left = keep if ended_at is None else keep - (time.time() - ended_at)
        return max(1, int(left * 1000))

    def _progress(self, entry: TaskEntry) -> str:
        """The progress line, counting only what was written since the last poll of this task; or, while the task
        waits for input, what it asks and the send that answers it (the model answers, not the user)."""
        task = entry.task
        asking = self.engine.rooms.answers.inputs.asking(entry)
        if asking is not None:
            return f"{asking.line}; {answer_step(task.id)}"
        with self._lock:
            got = self._tellings.get(task.id)
            if got is None or got[0] is not task:
                for key in [k for k, (t, _) in self._tellings.items() if t.ended]:
                    del self._tellings[key]
                telling = WaitTelling(self.engine.registry, [entry], self.engine.rooms.answers.sources, None,
                                      time.monotonic)
                self._tellings[task.id] = (task, telling)
            else:
                telling = got[1]
                telling.news()
            return telling.message()


def _summary(task: Task) -> str:
    r = task.result
    return known_kv(status=task.shown_state, exit_code=r.exit_code if r else None, signal=r.signal if r else None,
                    duration=f"{r.duration:.2f}s" if r and r.duration is not None else None,
                    note=r.note if r else None)


def _seen_line(task: Task) -> str:
    return (f"bash task {task.id} ended ({_summary(task)}); you were shown its end already (a status, kill or send "
            f"answer): nothing new to read. status(id=\"{task.id}\") shows it again.")


def _stopping(task: Task, grace: float) -> str:
    return (f"stopping: SIGINT sent to the process group of bash task {task.id} (tasks/cancel); SIGKILL follows "
            f"{grace:g}s later if it still runs")
