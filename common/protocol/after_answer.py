"""Work a request leaves for after its answer is sent: `after_answer(fn)` inside a request, run by the WSGI layer
once the answer's bytes are written (waitress closes the response after writing it), while the client reads the
answer. For what must happen soon but is no part of the answer (spares.py)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator

log = logging.getLogger(__name__)

_pending = threading.local()


def after_answer(fn: Callable[[], None]) -> None:
    """Run `fn` once this thread's current answer is sent (at once outside a request)."""
    queue = getattr(_pending, "queue", None)
    if queue is None:
        _run(fn)
    else:
        queue.append(fn)


def begin() -> None:
    """A request starts in this thread: collect its after_answer work."""
    _pending.queue = []


def answer_then_run(body: Iterable[bytes]) -> AnswerThenRun:
    """The response body, wrapped so that closing it (after it is sent) runs the collected work."""
    queue, _pending.queue = _pending.queue, None
    return AnswerThenRun(body, queue)


class AnswerThenRun:
    def __init__(self, body: Iterable[bytes], work: list[Callable[[], None]]):
        self.body = body
        self.work = work

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.body)

    def close(self) -> None:
        close = getattr(self.body, "close", None)
        if close is not None:
            close()
        for fn in self.work:
            _run(fn)


def _run(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # the answer is sent already: nothing to report it to but the log
        log.exception("work after an answer failed")
