"""A tty task's pseudo-terminal: its slave is the task's stdin, stdout and stderr; one thread per terminal copies
the master side into `<id>.out`, a read buffer at a time (nothing else of the output is held in memory).

How the task gets it as its controlling terminal without `preexec_fn` (unsafe in a threaded daemon):
`start_new_session=True` makes the child a session leader with no controlling terminal, and bash itself, at
start, opens the terminal named by its stdin without O_NOCTTY (bash's `check_dev_tty`, in shell.c since 2.x):
a session leader with no controlling terminal that opens a terminal acquires it, and its process group becomes
the terminal's foreground group. So `getpass` can open /dev/tty, and the `ctrl-c` key (the terminal's INTR)
signals the task's group as a terminal would (docs/design.md, "Linux processes"; tests/bash/test_interactive.py
keeps it). The daemon opens both ends with O_NOCTTY (os.openpty does), so a daemon that is itself a session
leader (systemd starts services so) never takes the task's terminal.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import select
import struct
import termios
import threading
import time

from common.disk.whole_files import write_all
from hivebash.stdin.blocked_read import terminal_target

log = logging.getLogger(__name__)

ROWS, COLUMNS = 40, 120  # a tty task's window size
# TERM of a tty task: a common terminal whose sequences (CSI, OSC, charset designations) the views remove
# (hivebash/output_views/terminal_text.py), and one that colour-aware programs (`ls --color=auto`, git) recognise.
TERM = "xterm-256color"
READ_BUFFER = 1 << 16  # bytes: the copier's one buffer
QUIET_MS = 20  # at the task's end: the copier closes the terminal once it has been quiet this long
SESSION_SECONDS = 2.0  # how long a send waits at most for a just-started task to take its terminal
FINISH_SECONDS = 2.0  # how long the task's worker waits for the copier at the task's end


class Terminal:
    """One pseudo-terminal. `slave` is for the spawn (closed once the task holds it); `master` is written to by
    sends (non-blocking, under `lock`) and read by the copier thread, which closes it at the end."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()  # O_NOCTTY and O_CLOEXEC on both (glibc openpty, CPython)
        try:
            fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
            os.set_blocking(self.master, False)  # a send never blocks a request thread
            self.slave_name = os.ttyname(self.slave)  # for a look at its unread input (input_taken)
            self.target = terminal_target(self.slave)  # what blocked_read looks for
        except OSError:
            self._close_both()
            raise
        self.lock = threading.Lock()  # guards `closed` and writes against the copier's close
        self.closed = False
        self._controlled = False  # the task's session has taken the terminal (its foreground group is set)
        self._stop = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._copier: threading.Thread | None = None
        self._dropping = False  # the last write of the copier found the disk full (logged once per spell)
        self.lost_output = False  # some of the terminal's output could not be written to <id>.out (said in the note)
        self._moving = False  # the copier holds bytes it read and has not written yet

    def spawned(self, out: int, task_id: str) -> None:
        """The task holds the slave now: drop the daemon's copy (so the master sees the hangup when the task's
        last process closes it) and start copying the master into `out`, a descriptor the copier owns."""
        os.close(self.slave)
        self.slave = -1
        self._copier = threading.Thread(target=self._copy, args=(out,), name=f"tty-{task_id}", daemon=True)
        self._copier.start()

    def abandon(self) -> None:
        """The spawn failed: close everything."""
        self._close_both()
        os.close(self._stop)

    def write(self, data: bytes) -> int:
        """Write what the terminal takes now; the count accepted (0 when its input buffer is full)."""
        if not self._controlled:
            self._await_session()
        with self.lock:
            if self.closed:
                raise BrokenPipeError(errno.EPIPE, "the terminal is closed")
            try:
                return os.write(self.master, data)
            except BlockingIOError:
                return 0
            except OSError as exc:
                if exc.errno == errno.EIO:  # every process of the task has closed the terminal
                    raise BrokenPipeError(errno.EPIPE, "the task closed its terminal") from None
                raise

    def _await_session(self) -> None:
        """Wait (bounded) until the task's session has taken the terminal: a ctrl-c typed before bash opened it
        would signal no group, and a send right after `run` can come that soon. The kernel tells no one when a
        session takes a terminal, so this looks (one ioctl) at short, growing intervals."""
        deadline = time.monotonic() + SESSION_SECONDS
        pause = 0.0005
        while True:
            with self.lock:
                if self.closed:
                    return
                try:
                    if os.tcgetpgrp(self.master) > 0:  # a master reports its slave's foreground group
                        self._controlled = True
                        return
                except OSError:
                    pass
            if time.monotonic() >= deadline:  # no session took it (the task left it): never wait again
                self._controlled = True
                return
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def foreground(self) -> int | None:
        """The terminal's foreground process group (the processes that may read it), or None."""
        with self.lock:
            if self.closed:
                return None
            try:
                group = os.tcgetpgrp(self.master)
            except OSError:
                return None
        return group if group > 0 else None

    def input_taken(self) -> bool | None:
        """Whether what was typed has been read (a line not yet ended counts as read: its reader waits for
        the rest); None when the terminal cannot be opened to look. A poll of the slave first moves what the
        master wrote into its input queue, so a key still on its way counts as unread."""
        try:
            fd = os.open(self.slave_name, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return not any(ev & select.POLLIN for _, ev in poller.poll(0))
        finally:
            os.close(fd)

    def output_copied(self) -> bool:
        """Whether everything the task wrote to the terminal is in `<id>.out` (nothing waits in the master, and
        the copier is not between its read and its write)."""
        with self.lock:
            if self.closed:
                return True
            poller = select.poll()
            poller.register(self.master, select.POLLIN)
            if any(ev & select.POLLIN for _, ev in poller.poll(0)):
                return False
        return not self._moving

    def finish(self) -> None:
        """At the task's end (by its worker, before the end is recorded): the copier takes what is left to read,
        then closes the terminal. Leftover processes still on it get SIGHUP, as when a terminal is closed."""
        copier = self._copier
        if copier is None:
            return
        os.eventfd_write(self._stop, 1)
        copier.join(FINISH_SECONDS)
        if copier.is_alive():  # (its eventfd stays open: it still polls it)
            log.warning("the terminal copier of %s did not finish in %gs", copier.name, FINISH_SECONDS)
        else:
            os.close(self._stop)
        self._copier = None

    def _copy(self, out: int) -> None:
        buf = bytearray(READ_BUFFER)
        poller = select.poll()
        poller.register(self.master, select.POLLIN)
        poller.register(self._stop, select.POLLIN)
        try:
            while True:
                events = dict(poller.poll())
                if self._stop in events:
                    return self._drain(buf, out)
                if self.master in events and self._move(buf, out) is None:
                    return  # hung up: every process of the task closed the terminal
        except Exception:
            log.exception("the terminal copier of %s failed", threading.current_thread().name)
        finally:
            os.close(out)
            with self.lock:
                self.closed = True
                os.close(self.master)

    def _drain(self, buf: bytearray, out: int) -> None:
        """The task's shell has exited: copy on until the hangup (the kernel hands over what the slave wrote
        before it reports it), or until the terminal is quiet (leftover processes still hold it) or the time
        is up (they keep writing)."""
        poller = select.poll()
        poller.register(self.master, select.POLLIN)
        deadline = time.monotonic() + FINISH_SECONDS / 2
        while time.monotonic() < deadline and poller.poll(QUIET_MS):
            if self._move(buf, out) is None:
                return

    def _move(self, buf: bytearray, out: int) -> bool | None:
        """Copy one read's worth: True if bytes moved, False if none were ready, None at the hangup."""
        self._moving = True  # (set before the read: output_copied polls the master, then reads this)
        try:
            n = os.readv(self.master, [buf])
            if n == 0:
                return None
            self._write_out(out, memoryview(buf)[:n])
            return True
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno == errno.EIO:  # Linux: the slave side is closed by all (after its output is read)
                return None
            raise
        finally:
            self._moving = False

    def _write_out(self, out: int, view: memoryview) -> None:
        """Write one read's worth to `<id>.out`. On a full disk the bytes are dropped and the copier goes on: a
        copier that stopped would close the terminal and hang up on the task, and one that waited for room
        would fill the terminal's buffer and block it; a task writing to a file sees ENOSPC and runs on too."""
        try:
            write_all(out, view)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise
            if not self._dropping:
                log.warning("%s: the terminal's output is dropped until there is room (%s)",
                            threading.current_thread().name, exc.strerror)
            self._dropping = True
            self.lost_output = True
            return
        self._dropping = False

    def _close_both(self) -> None:
        for fd in (self.master, self.slave):
            if fd >= 0:
                os.close(fd)
        self.master = self.slave = -1
