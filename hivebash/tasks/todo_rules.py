"""Which todo each task gets (todos keyed by task id), per docs/tools/bash.md:

- `run` that returns `task started` upserts a "running" todo once the task has run for a moment
  (runner.RUNNING_RECORD_DELAY; a queued task's at once); the completion replaces it with the summary, or is
  the only todo of a task that ended sooner;
- a result the agent has already seen (an inline wait or any `status` that observed the terminal task)
  creates no todo, and clears one that is open;
- tasks found `pending`/`running` at start become `interrupted`, with one best-effort todo each.

The rules are decided under the registry's lock (registry.LockedTasks sets the entry's `seen`/`todo_open`
and builds each todo here); the calls they decide are queued in `TodoCalls` and made after the lock is
released, in the same order, because the todo object may write its outbox to disk and no tool call may wait
on that.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from common.facts import known_kv
from common.humanize import one_line
from common.todos import Todos
from hivebash.output_views.kept import passed_line
from hivebash.tasks.entry import TaskEntry

if TYPE_CHECKING:
    from hivebash.disk.store import TaskStore

log = logging.getLogger(__name__)


def still_alive_line(task_id: str, pids: list[int]) -> str:
    """What a task's shell left running, and how to stop it (every answer while they live, and the todo)."""
    verbs = "runs and writes" if len(pids) == 1 else "run and write"
    return (f"the shell exited; {len(pids)} process{'es' if len(pids) != 1 else ''} it started still {verbs} "
            f"to its output (pids {' '.join(map(str, pids))}); kill(id=\"{task_id}\") stops them")


shell_exited_line = still_alive_line


def unsaved_line(reason: str) -> str:
    """A task whose end could not be saved (Lifecycle.persist): what that means, and what to do."""
    full = "no space" in reason.lower()
    return (f"warning: the end is not saved: {'the state disk is full' if full else 'the state disk refused it'} "
            f"({reason}); a restart will report this task as interrupted. Free space in the state directory: "
            "the daemon saves it again within 30 s")


def _leftovers_line(entry: TaskEntry) -> str:
    return still_alive_line(entry.id, [p.pid for p in entry.leftovers]) + "\n" if entry.leftovers else ""


Todo = tuple[str, str, str, dict]  # key, summary, body, data: one upsert


def running_todo(entry: TaskEntry, queued: bool, store: TaskStore) -> Todo:
    """The "running" (or "queued") todo of a task `run` answered as started."""
    task = entry.task
    what = "queued" if queued else "running"
    out, err = store.file(task.id, "out"), store.file(task.id, "err")
    body = (f"bash task {task.id} is {what}: {one_line(task.cmd, 200)}\n"
            f"Output so far: Read({out})" + ("" if task.stdin == "tty" else f" and Read({err})") +
            f". Check it with status(id=\"{task.id}\"); "
            "its completion will replace this todo.")
    return (task.id, f"bash {task.id} {what}: {one_line(task.cmd, 60)}", body,
            {"id": task.id, "status": task.shown_state})


def asking_todo(entry: TaskEntry, prompt: str) -> Todo:
    """The todo of a task that waits for input while no call waits on it: what it asks, and the call that answers."""
    task = entry.task
    asks = f"waits for input: {json.dumps(prompt, ensure_ascii=False)}" if prompt.strip() else \
        "waits for input (no prompt on its last line)"
    body = (f"bash task {task.id} {asks}\ncommand: {one_line(task.cmd, 200)}\n"
            f"send(id=\"{task.id}\", text=\"...\") types the answer and shows what it printed; "
            f"status(id=\"{task.id}\") shows its output.")
    return (task.id, f"bash {task.id} {one_line(asks, 100)}", body,
            {"id": task.id, "status": task.shown_state, "waiting_for_input": prompt})


def completion_todo(entry: TaskEntry, store: TaskStore, data: dict) -> Todo:
    """The completion todo of an ended task; `data` is its view."""
    task, r = entry.task, entry.task.result
    facts = known_kv(status=task.shown_state, exit_code=r.exit_code if r else None,
                     signal=r.signal or None if r else None,
                     duration=f"{r.duration:.2f}s" if r and r.duration is not None else None,
                     leftover_processes=len(entry.leftovers) or None)
    out, err = store.file(task.id, "out"), store.file(task.id, "err")
    body = (f"bash task {task.id} finished: {facts}\n"
            f"command: {one_line(task.cmd, 200)}\n" + (f"note: {r.note}\n" if r and r.note else "") +
            (f"{passed} (Read shows the dropped range as NUL bytes; status(id=\"{task.id}\", grep=...) or "
             "from_line skip it)\n" if (passed := passed_line(task.dropped)) else "") +
            _leftovers_line(entry) + (unsaved_line(entry.unsaved) + "\n" if entry.unsaved else "") +
            (f"output (a terminal: stderr included): Read({out})\n" if task.stdin == "tty" else
             f"stdout: Read({out})\nstderr: Read({err})\n") +
            f"status(id=\"{task.id}\") shows the tails and clears this todo.")
    return task.id, f"bash {task.id} {facts}: {one_line(task.cmd, 60)}", body, data


class TodoCalls:
    """The todo calls decided under the registry's lock, made after it in decision order."""

    def __init__(self, todos: Todos):
        self.todos = todos
        self._pending_lock = threading.Lock()  # guards _pending and _held
        self._pending: collections.deque[tuple[str, tuple]] = collections.deque()
        self._delivering = threading.Lock()  # held by the one thread delivering the pending calls
        self._held: dict[object, tuple[threading.Timer, Callable[[], None]]] = {}  # `later`'s timers not run yet
        self._timer = threading.Timer  # (tests may pass their own)

    def upsert(self, todo: Todo) -> None:
        self._queue("upsert", *todo)

    def later(self, seconds: float, call: Callable[[], None]) -> None:
        """Run `call` after `seconds` (a timer started when the lock is released); `run_held` runs it sooner."""
        self._queue("later", seconds, call)

    def run_held(self) -> None:
        """Run every call `later` still holds, now (shutdown: a held todo must not be lost)."""
        with self._pending_lock:
            held, self._held = self._held, {}
        for timer, call in held.values():
            timer.cancel()
            call()
        self.flush()

    def _start_timer(self, seconds: float, call: Callable[[], None]) -> None:
        key = object()

        def fire() -> None:
            with self._pending_lock:
                mine = self._held.pop(key, None) is not None
            if mine:
                call()

        timer = self._timer(seconds, fire)
        timer.daemon = True
        with self._pending_lock:
            self._held[key] = (timer, call)
        timer.start()

    def clear(self, key: str) -> None:
        self._queue("clear", key)

    def _queue(self, op: str, *args) -> None:
        with self._pending_lock:
            self._pending.append((op, args))

    def flush(self) -> None:
        """Deliver queued todo calls in decision order, outside the registry's lock, one deliverer at a time
        (the registry's handle calls it when it is released).

        A caller that finds another deliverer at work leaves at once: that deliverer takes its calls too (they
        are queued before this is called), so no tool call queues behind another call's outbox write."""
        if not self._pending:  # a hint read without the lock: whoever queues a call flushes after it
            return
        while True:
            if not self._delivering.acquire(blocking=False):
                return
            try:
                while True:
                    with self._pending_lock:
                        calls, self._pending = self._pending, collections.deque()
                    if not calls:
                        break
                    for op, args in calls:
                        try:
                            if op == "later":
                                self._start_timer(*args)
                            else:
                                getattr(self.todos, op)(*args)
                        except Exception:  # a todo must never break a tool call or a worker
                            log.exception("todo %s failed", op)
            finally:
                self._delivering.release()
            with self._pending_lock:  # a call queued after our last look, whose producer saw the lock held
                if not self._pending:
                    return
