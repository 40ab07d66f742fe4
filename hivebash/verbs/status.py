"""The `status` verb: one task (`task_id`) or several (`ids`: the wait ends when the first ends), with an
optional inline wait for an end or a matching output line; `view` chooses what of the output is shown."""

from __future__ import annotations

from common.protocol.tools import CallContext
from hivebash import output_views as ov
from hivebash.answers.inline_wait import wait_for_watches
from hivebash.answers.outcomes import ManyOutcome, Outcome
from hivebash.tasks import task as T
from hivebash.verbs.requests import StatusRequest
from hivebash.verbs.rooms import Rooms

MANY_VIEW = ov.ViewRequest(tail_lines=3)  # status(ids): each ended task's last lines
RECORD_GRACE = 5.0  # seconds a status without a wait waits at most for a just-ended task's record (a disk write)


def status(rooms: Rooms, req: StatusRequest, call: CallContext) -> Outcome | ManyOutcome:
    """An `operator`'s status is not the agent's read: it clears no todo and moves no new_only cursor. With
    `ids`, the wait ends when the next of those still running ends (`every`: when all have); one that had
    ended before the call ends no wait."""
    window, operator, client_gone = req.window, call.operator, call.client_gone
    answers = rooms.answers
    with rooms.registry.locked() as tasks:
        entries = [tasks.get(i) for i in req.ids]
        ended_before = {e.id for e in entries if e.task.terminal}
        wait_on = [e for e in entries if e.id not in ended_before]
        registered = window.seconds > 0 and bool(wait_on) and (req.many or not ended_before)
        if registered:
            tasks.agent.wait_inline(entries)
        else:
            # An end is answered once its record is on disk, as an inline wait answers it: a daemon killed
            # right after the answer must not read `interrupted` at its next start.
            tasks.wait(lambda: not any(e.task.state == T.ENDING for e in entries), RECORD_GRACE)
            for entry in entries:
                if entry.task.ended and not operator:
                    tasks.agent.hand_over(entry, client_gone)
    shows = not req.many and not operator  # the answer shows the agent this task's output
    if registered:
        watches = wait_for_watches(answers.sources, entries, req.wait_for, from_start=False) if req.wait_for else []
        outcome = answers.answer_after_wait(entries, window, from_run=False, client_gone=client_gone, watches=watches,
                                            wait_for=req.wait_for, operator=operator, view=req.view, shows=shows,
                                            cancel=call.cancel, progress=call.progress, wait_on=wait_on,
                                            every=req.every)
    else:
        first = next((e for e in entries if e.task.ended), entries[0])
        outcome = Outcome(answers.view(first.id, req.view, shows), window, 0.0, wait_for=req.wait_for,
                          notices=answers.notices)
    if not req.many:
        return outcome
    return ManyOutcome([answers.view(e.id, MANY_VIEW, shows=False) for e in entries], outcome, ended_before,
                       req.every)
