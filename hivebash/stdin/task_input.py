"""A task's input: what `run(stdin=...)` gives the task, and the handle `send` writes through.

- `null` (the default): /dev/null, exactly as every task had before; no handle.
- `pipe`: the read end of a pipe is the task's stdin; its write end, non-blocking, is the handle. Output goes
  to `<id>.out`/`<id>.err` as for any task (no pipe carries output).
- `tty`: a pseudo-terminal (terminal.py) is the task's stdin, stdout and stderr; the handle writes to its
  master, whose output a thread copies to `<id>.out`.

A write never blocks (a request thread must never wait on a task that does not read): it takes what the pipe
or the terminal accepts now and says how much that was. The handle is closed when the task ends.
"""

from __future__ import annotations

import fcntl
import os
import termios
import threading

from hivebash.stdin.blocked_read import Target, pipe_target
from hivebash.stdin.terminal import TERM, Terminal

NULL, PIPE, TTY = "null", "pipe", "tty"
KINDS = (NULL, PIPE, TTY)
_TERM_KEY = b"TERM"


class InputClosed(Exception):
    """The task's input is closed (its end, an `eof` on a pipe, or the task closed its terminal)."""


class TaskInput:
    """The write side of a task's stdin; thread-safe (sends to one task may come at once)."""

    def __init__(self, kind: str, fd: int | None = None, terminal: Terminal | None = None):
        self.kind = kind
        self._fd = fd  # a pipe's write end (None once closed)
        self.terminal = terminal
        self._lock = threading.Lock()
        self.target: Target = terminal.target if terminal is not None else pipe_target(fd)  # type: ignore[arg-type]
        self.sent = 0  # bytes written so far: a wait for input after a send is another wait

    def write(self, data: bytes) -> int:
        """Write what fits now; the number of bytes accepted. Raises InputClosed."""
        n = self._write(data)
        self.sent += n
        return n

    def _write(self, data: bytes) -> int:
        if self.terminal is not None:
            try:
                return self.terminal.write(data)
            except BrokenPipeError:
                raise InputClosed("the task's terminal is closed") from None
        with self._lock:
            if self._fd is None:
                raise InputClosed("its input was closed (eof)")
            try:
                return os.write(self._fd, data)
            except BlockingIOError:
                return 0
            except BrokenPipeError:  # nothing of the task has the read end open any more
                raise InputClosed("the task closed its input") from None

    def input_taken(self) -> bool | None:
        """Whether the task has read all that was sent (None: cannot tell). A closed pipe has nothing to read."""
        if self.terminal is not None:
            return self.terminal.input_taken()
        with self._lock:
            if self._fd is None:
                return None
            try:
                unread = int.from_bytes(fcntl.ioctl(self._fd, termios.FIONREAD, b"\0\0\0\0"), "little")
            except OSError:
                return None
        return unread == 0

    def output_copied(self) -> bool:
        """Whether the task's output is all in its files (a terminal's copier has caught up; a pipe task
        writes to its files itself)."""
        return self.terminal is None or self.terminal.output_copied()

    def foreground(self) -> int | None:
        """A terminal's foreground process group (only it reads the terminal); None for a pipe."""
        return self.terminal.foreground() if self.terminal is not None else None

    def eof(self) -> bool:
        """End the input: a pipe is closed (the task reads end of file); a terminal gets ctrl-d (its EOF).
        False when the terminal's full input buffer took no ctrl-d."""
        if self.terminal is not None:
            return self.write(b"\x04") == 1
        self.close()
        return True

    @property
    def lost_output(self) -> bool:
        """Some of a terminal's output was dropped for want of room (the copier's own writes: known exactly)."""
        return self.terminal is not None and self.terminal.lost_output

    def close(self) -> None:
        """At the task's end (its worker): a pipe's write end is closed; a terminal is finished by its copier."""
        if self.terminal is not None:
            self.terminal.finish()
            return
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


class Stdio:
    """What one spawn gets as stdin, stdout and stderr, and the task's input handle once it runs."""

    def __init__(self, kind: str, devnull: int, out: int, err: int):
        self.kind = kind
        self.stdin, self.stdout, self.stderr = devnull, out, err
        self._child_end: int | None = None
        self._copy_to: int | None = None  # a tty's copier's own descriptor of `<id>.out`
        self.input: TaskInput | None = None
        if kind == PIPE:
            read_end, write_end = os.pipe2(os.O_CLOEXEC)
            os.set_blocking(write_end, False)
            self.stdin, self._child_end = read_end, read_end
            self.input = TaskInput(PIPE, fd=write_end)
        elif kind == TTY:
            terminal = Terminal()
            try:
                self._copy_to = os.dup(out)
            except OSError:
                terminal.abandon()
                raise
            self.stdin = self.stdout = self.stderr = terminal.slave
            self.input = TaskInput(TTY, terminal=terminal)

    def environment(self, env: dict[bytes, bytes]) -> dict[bytes, bytes]:
        if self.kind == TTY:
            env[_TERM_KEY] = TERM.encode()
        return env

    def spawned(self, task_id: str) -> None:
        """The task runs: close the ends the daemon must not hold; a tty's copier starts."""
        if self._child_end is not None:
            os.close(self._child_end)
            self._child_end = None
        if self.input is not None and self.input.terminal is not None and self._copy_to is not None:
            copy_to, self._copy_to = self._copy_to, None
            self.input.terminal.spawned(copy_to, task_id)

    def failed(self) -> None:
        """The spawn failed: close everything made for it."""
        for fd in (self._child_end, self._copy_to):
            if fd is not None:
                os.close(fd)
        if self.input is not None:
            if self.input.terminal is not None:
                self.input.terminal.abandon()
            else:
                self.input.close()
        self.input = None
