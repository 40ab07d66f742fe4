"""When a pipe or tty task waits for input, and when to look.

A task waits for input when the kernel shows one of its processes blocked reading its stdin pipe or its
terminal (stdin/blocked_read.py), what was sent has all been read and its output is all in its files; at once
when every other thread of it sleeps where nothing comes without an event (a child wait) and the readers'
wchan confirms the wait, QUIET_SETTLE_SECONDS later when wchan cannot, else once its output has not grown for
SETTLE_SECONDS. A prompt printed by a program that goes on computing is not a wait; nor is a reader caught the
instant it took the input, still inside its `read` (the kernel shows the call until it returns: wchan then
names a lock). Where /proc cannot tell, nothing is said.

Looks are made by a call that waits on the task (answers/inline_wait.py: often), by an answer about it
(`status`, `list`: one look), and, for the tasks no call waits on, by the watch's thread every
IDLE_LOOK_SECONDS, which tells the agent's side (tasks/agent_side.py: the keyed todo, once per wait).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from hivebash.output_views.reading import file_size
from hivebash.processes.input_look import asking_line, prompt_of
from hivebash.stdin.blocked_read import read_task
from hivebash.stdin.task_input import NULL, TTY, TaskInput
from hivebash.tasks import task as T
from hivebash.tasks.entry import TaskEntry
from hivebash.tasks.registry import TaskRegistry
from hivebash.tasks.task import Task

log = logging.getLogger(__name__)

SETTLE_SECONDS = 0.03  # output still this long, for a task with other threads awake, before it counts as waiting
QUIET_SETTLE_SECONDS = 0.001  # the same for a task whose other threads all wait for a child
SHORT_SETTLE = 0.005  # seconds an answer's one look waits at most for a settle to end (a quiet task's)
IDLE_LOOK_SECONDS = 1.0  # between the watch's looks at the tasks no call waits on


@dataclass(frozen=True)
class Asking:
    """A task waiting for input: which wait it is (`key`: input sent so far and output sizes; the same wait
    while neither changes) and its prompt (the unfinished last line, cleaned)."""

    key: tuple
    prompt: str

    @property
    def line(self) -> str:
        return asking_line(self.prompt)


class InputCheck:
    """The looks at one running task: its shell's pid, its input, its output files, and the settle memory.
    Thread-safe: a wait, an answer and the watch may look at once."""

    def __init__(self, leader: int, handle: TaskInput, paths: list[str], clock: Callable[[], float]):
        self.leader, self.handle, self.paths, self.clock = leader, handle, paths, clock
        self._lock = threading.Lock()
        self._still: tuple[float, tuple] | None = None  # since when the output has been still, at which key
        self._last: Asking | None = None  # the last wait found (its prompt is read once)
        self._found: Asking | None = None  # what the last look found
        self.due: float | None = None  # when a look could tell what this one could not yet (the settle's end)

    def look(self) -> Asking | None:
        """The wait for input the task is in now, or None (not waiting, settling, or /proc cannot tell)."""
        with self._lock:
            self._found = self._look()
            return self._found

    def still(self) -> Asking | None:
        """The wait the last look found, while nothing was sent and nothing written since (two stats, no /proc
        read: a task in a wait for input does neither until it gets some); else None."""
        found = self._found
        if found is None or found.key != (self.handle.sent, tuple(file_size(p) for p in self.paths)):
            return None
        return found

    def _look(self) -> Asking | None:
        """The input is looked at before the processes: a reader that took it is then seen running, or in its
        next call (taken after, a look could see the call it was in before the input came)."""
        self.due = None
        handle = self.handle
        sent = handle.sent
        if handle.input_taken() is not True:
            self._still = None
            return None
        foreground = handle.foreground() if handle.terminal is not None else None
        reading = read_task(self.leader, handle.target, foreground)
        if not reading.readers or not handle.output_copied() or handle.sent != sent:
            self._still = None
            return None
        key = (sent, tuple(file_size(p) for p in self.paths))
        settle = (0.0 if reading.confirmed else QUIET_SETTLE_SECONDS) if reading.quiet else SETTLE_SECONDS
        now = self.clock()
        if self._still is None or self._still[1] != key:
            self._still = (now, key)
        if now - self._still[0] < settle:
            self.due = self._still[0] + settle
            return None
        if self._last is None or self._last.key != key:
            self._last = Asking(key, prompt_of(self.paths))
        return self._last


class InputWatch:
    """The checks of the running pipe and tty tasks (made at a first look, dropped at the task's end), and the
    thread that looks at those no call waits on."""

    def __init__(self, registry: TaskRegistry, paths: Callable[[str, bool], list[str]],
                 clock: Callable[[], float] = time.monotonic, idle: float = IDLE_LOOK_SECONDS):
        self.registry, self.paths, self.clock, self.idle = registry, paths, clock, idle
        self._checks: dict[str, tuple[Task, InputCheck]] = {}  # task id -> (its task, its check)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self, entry: TaskEntry) -> InputCheck | None:
        """The entry's check (read without the registry's lock: a running task's pid and input are set once);
        None for a task that takes no input or does not run."""
        task, runner = entry.task, entry.runner
        handle = runner.input if runner is not None else None
        if task.stdin == NULL or handle is None or task.pid is None or task.ended:
            return None
        with self._lock:
            known = self._checks.get(task.id)
            if known is not None and known[0] is task:
                return known[1]
            made = InputCheck(task.pid, handle, self.paths(task.id, task.stdin == TTY), self.clock)
            self._checks[task.id] = (task, made)
            return made

    def asking(self, entry: TaskEntry) -> Asking | None:
        """One look at the entry (None: it takes no input, runs no more, or does not wait for it); a wait found
        before that nothing has changed since costs two stats (`InputCheck.still`)."""
        check = self.check(entry)
        if check is None:
            return None
        asking = check.still() or check.look()
        if asking is None and check.due is not None and check.due - self.clock() <= SHORT_SETTLE:
            time.sleep(max(0.0, check.due - self.clock()))
            asking = check.look()
        return asking

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="input-watch", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.idle):
            try:
                self.look_unwatched()
            except Exception:  # the watch must never die: the next pass looks again
                log.exception("the input watch's look failed")

    def look_unwatched(self) -> None:
        """One pass: each running pipe or tty task no call waits on is looked at (again after the settle,
        when a look could not tell yet) and the agent's side told what was found."""
        with self.registry.locked() as tasks:
            entries = [e for e in tasks.entries() if e.task.stdin != NULL and e.task.state == T.RUNNING
                       and not e.inline_waiters]
        self._forget_ended({e.id for e in entries})
        found = []
        for entry in entries:
            check = self.check(entry)
            if check is None:
                continue
            asking = check.still() or check.look()
            if asking is None and check.due is not None and not self._stop.wait(max(0.0, check.due - self.clock())):
                asking = check.look()
            found.append((entry, asking))
        if found:
            with self.registry.locked() as tasks:
                for entry, asking in found:
                    tasks.agent.input_looked(entry, asking.key if asking else None, asking.prompt if asking else "")

    def _forget_ended(self, running: set[str]) -> None:
        with self._lock:
            for task_id in [i for i, (task, _) in self._checks.items() if i not in running and task.ended]:
                del self._checks[task_id]
