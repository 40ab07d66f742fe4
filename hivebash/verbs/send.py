"""The `send` request: write to a running task's input, wait a moment, answer with what it printed since.

The write never blocks a request thread (task_input.py): what the pipe or terminal does not take now is not
sent, and the answer says how much was. Then the call waits like `status` (default SEND_WAIT_DEFAULT, capped
at 30 s), ending early at the task's end or at a `wait_for` match; a prompt (`>>> `, `[y/N] `) is a line still
without its newline, so here `wait_for` also looks at the last, unfinished line (PromptWatch). The answer shows
the output written since the write, cleaned as every view is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from common.notices import Notices
from common.protocol.call_progress import Cancellation, ProgressReporter
from common.protocol.tools import CallContext
from common.waiting import WaitWindow
from hivebash import output_views as ov
from hivebash.answers.answering import Answers, Waited
from hivebash.answers.inline_wait import gap_of as _gap_of
from hivebash.answers.inline_wait import output_sources
from hivebash.errors import EngineError
from hivebash.stdin.task_input import NULL, PIPE, InputClosed, TaskInput
from hivebash.tasks.entry import TaskEntry
from hivebash.tasks.registry import LockedTasks, TaskRegistry
from hivebash.tasks.snapshot import TaskSnapshot
from hivebash.verbs.requests import SendRequest

# A send's wait looks at the output first this soon after the write, then at doubling intervals (up to
# inline_wait.WATCH_RECHECK_MAX): an echo or a REPL's answer comes within a millisecond or two.
SEND_RECHECK_FIRST = 0.001
SEND_BUDGET = 5 * 1024  # bytes of output text in one answer (the facts and the next call fit in the rest of 8 KiB)


@dataclass
class SendOutcome:
    view: TaskSnapshot
    asked: int  # bytes the call wanted written
    accepted: int  # bytes the input took
    eof: bool  # the input was ended (a pipe closed, a terminal sent ctrl-d)
    closed: str | None  # why nothing could be written: the input was closed
    output: ov.View  # what the task printed since the write
    window: WaitWindow
    waited: float
    wait_for: str | None = None
    matched: ov.Line | None = None
    wait_skipped: bool = False
    notices: Notices = Notices(True)  # whether completions reach the agent (views.Outcome.notices)


class Sender:
    """`send`: the checks, the write, the wait and the answer's view (taking the registry's lock itself)."""

    def __init__(self, registry: TaskRegistry, answers: Answers):
        self.registry = registry
        self.answers = answers

    def send(self, req: SendRequest, call: CallContext) -> SendOutcome:
        client_gone, operator = call.client_gone, call.operator
        with self.registry.locked() as tasks:
            entry = tasks.get(req.task_id)
            handle = self._input(entry, req)
            tasks.agent.wait_inline([entry])  # its end, if it comes during the wait, is this answer's (no todo)
            tasks.agent.input_answered(entry)  # a "waits for input" todo is the "running" one again
        sources = self.sources(entry)
        offsets = {src.stream: ov.file_size(src.path) for src in sources}
        accepted, ended, closed = _write(handle, req)
        watches: list[tuple[str, ov.Watch]] = (
            [(entry.id, ov.PromptWatch(src, req.wait_for, offsets[src.stream], _gap_of(entry, src.stream)))
             for src in sources] if req.wait_for else [])
        waited = self._wait(entry, req, watches, client_gone, operator, call.cancel, call.progress)
        with self.registry.locked() as tasks:
            view = tasks.view(entry.id)  # no tails: the output since the write is the answer's
        self.answers.note_asking(view, entry, not operator and not client_gone(), waited.asking)
        output = ov.tail(self.sources(entry), offsets, new_only=True, budget=SEND_BUDGET,
                         again=f'status(id="{entry.id}", new_only=true)')
        if not operator and not client_gone():
            with self.registry.locked() as tasks:
                tasks.agent.moved_on(entry, offsets, output.read_to)
        return SendOutcome(view, len(req.data), accepted, ended, closed, output, req.window,
                           waited.seconds, req.wait_for, waited.matched, waited.skipped, self.answers.notices)

    @staticmethod
    def _input(entry: TaskEntry, req: SendRequest) -> TaskInput:
        """The task's input handle, or the refusal that says why it takes none and what to do."""
        task = entry.task
        if task.stdin == NULL:
            raise EngineError(f"id: task {task.id!r} was started with stdin \"null\" and reads no input; "
                              "run it again with stdin: \"pipe\" (plain input) "
                              "or stdin: \"tty\" (a terminal, for prompts and REPLs)")
        if task.ended:
            raise EngineError(f"id: task {task.id!r} has ended (status={task.shown_state}); nothing reads its input "
                              f"any more. status(id=\"{task.id}\") shows its output")
        if req.keyed and task.stdin == PIPE:
            raise EngineError(f"keys: task {task.id!r} reads a pipe, not a terminal; control keys need stdin: \"tty\" "
                              "(send text, or eof: true to end its input)")
        handle = entry.runner.input if entry.runner is not None else None
        if handle is None:
            raise EngineError(f"id: task {task.id!r} is {task.shown_state} and has not started yet; send once it runs "
                              f"(status(id=\"{task.id}\", wait_seconds=5))")
        return handle

    def sources(self, entry: TaskEntry) -> list[ov.Source]:
        """The streams it writes, each with its dropped middle as the task's record has it now."""
        dropped = entry.task.dropped  # replaced whole at each change: read without the lock
        return [dataclasses.replace(src, gap=ov.Gap.of(dropped, src.stream))
                for src in output_sources(self.answers.sources, entry)]

    def _wait(self, entry: TaskEntry, req: SendRequest, watches: list[tuple[str, ov.Watch]],
              client_gone: Callable[[], bool], operator: bool, cancel: Cancellation | None,
              progress: ProgressReporter) -> Waited:
        """The inline wait of `status` (its end is this answer's, progress as a status wait gives it), first
        looking at the output a millisecond after the write; the agent's side is told the wait is over even
        when it fails."""
        told = False

        def finish(tasks: LockedTasks, waited: Waited) -> Waited:
            nonlocal told
            told = True
            tasks.agent.done_waiting([entry], False, (lambda: True) if operator else client_gone)
            return waited

        try:
            return self.answers.wait([entry], req.window, finish, watches=watches, wait_for=req.wait_for,
                                     cancel=cancel, progress=progress, first_recheck=SEND_RECHECK_FIRST,
                                     sources=lambda _: self.sources(entry), leftovers_write=False, asking=True)
        finally:
            if not told:
                with self.registry.locked() as tasks:
                    tasks.agent.done_waiting([entry], False, (lambda: True) if operator else client_gone)


def _write(handle: TaskInput, req: SendRequest) -> tuple[int, bool, str | None]:
    """Write what the input takes now, then end it if asked: (bytes accepted, whether the input was ended, why
    it is closed). A terminal that took only part of the text gets no ctrl-d: typed after the cut, it would end
    what the task reads mid-text."""
    accepted, ended = 0, False
    try:
        while accepted < len(req.data):
            n = handle.write(req.data[accepted:])
            if n <= 0:
                break
            accepted += n
        if req.eof and (accepted == len(req.data) or handle.kind == PIPE):
            ended = handle.eof()
    except InputClosed as exc:
        return accepted, False, str(exc)
    return accepted, ended, None

