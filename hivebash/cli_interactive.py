"""`hive-bash send` and `hive-bash attach`: the operator types into a task that takes input (`--stdin pipe|tty`).

Both call the daemon's `send` tool as the operator (common.protocol.client marks the call): an operator's send never
clears the agent's todo of the task nor moves what the agent has been shown. `attach` shows the task's output
live, read from its files in the state directory as `tail -f` does, and sends what the operator types until
the detach key (ctrl-], as `docker attach`/telnet) or the task's end; with piped input it says each time the
task starts waiting for input (on a terminal the operator sees the prompt itself; the banner says it once).
"""

from __future__ import annotations

import codecs
import os
import select
import sys
import termios
import time
import tty
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from common.cli_base import DaemonClient, json_option, show, task_exit_code
from hivebash.cli_tail import KeptCopier, status_gap
from hivebash.processes.input_look import asking_line

if TYPE_CHECKING:  # the tools' argument types only (importing hivebash.tools would load the engine)
    from hivebash.tools import StatusArgs
    from hivebash.tools.send import SendArgs

DETACH = b"\x1d"  # ctrl-]
ATTACH_POLL = 0.05  # seconds between looks at the output files and the operator's keyboard
STATE_EVERY = 0.5  # seconds between looks at whether the task has ended
BACKLOG = 2048  # bytes of earlier output shown when attaching


@click.command("send")
@click.argument("task_id", metavar="ID")
@click.argument("text", required=False)
@click.option("--key", "keys", multiple=True, metavar="KEY",
              help="A control key pressed after TEXT (tty tasks), repeatable: ctrl-c, ctrl-d, tab, up, enter, ...")
@click.option("--eof", is_flag=True, default=None, help="End the task's input afterwards (a tty gets ctrl-d).")
@click.option("--no-enter", "enter", flag_value=False, default=None, help="Do not press Enter after TEXT.")
@click.option("--wait", "wait_seconds", type=click.FloatRange(min=0), default=None,
              help="Seconds to wait for output [default: the daemon's, 2; capped at 30].")
@click.option("--wait-for", metavar="REGEX", help="Stop waiting at an output line (or a prompt) matching REGEX.")
@json_option
@click.pass_obj
def send_cmd(client: DaemonClient, task_id: str, text: str | None, keys: tuple[str, ...], eof: bool | None,
             enter: bool | None, wait_seconds: float | None, wait_for: str | None, as_json: bool) -> None:
    """Type TEXT (then Enter) into a task started with --stdin pipe or tty; print what it printed since.

    \b
    hive-bash send py 'print(6 * 7)' --wait-for '>>> $'
    hive-bash send installer y
    hive-bash send py --key ctrl-c
    hive-bash send feed --eof

    Exits with the task's exit code if it ended during the wait, else 0. Your send is the operator's: it
    never clears the agent's todo of the task."""
    args = {"id": task_id, "text": text, "keys": list(keys) or None, "eof": eof, "enter": enter,
            "wait_seconds": wait_seconds, "wait_for": wait_for}
    result = client.call("send", args, as_json=as_json, wait=wait_seconds or 2.0)
    show(result, as_json)
    sys.exit(task_exit_code(result.data))


@click.command("attach")
@click.argument("task_id", metavar="ID")
@click.pass_obj
def attach_cmd(client: DaemonClient, task_id: str) -> None:
    """Watch a task's output live and type into it, until ctrl-] (detach) or its end.

    For a task started with --stdin tty or pipe. On a terminal your keys go to the task as you press them
    (ctrl-c included: on a tty task it is the task's interrupt); ctrl-] detaches and leaves the task
    running. With input piped into attach, its lines are sent and the task followed until it ends.

    Exits with the task's exit code when it ends, 0 on detach."""
    look: StatusArgs = {"id": task_id}
    data = client.call("status", look).data
    if data.get("stdin", "null") == "null":
        raise click.ClickException(f"task {task_id} was started without input (stdin null): nothing to attach to; "
                                   f"`hive-bash tail -f {task_id}` follows its output")
    streams = ["stdout"] + (["stderr"] if data["stdin"] == "pipe" else [])
    try:
        follow = [OutputFollower(client, task_id, data, s) for s in streams]
    except OSError as exc:
        raise click.ClickException(f"{data['stdout']['path']}: {exc.strerror} (is the daemon's state directory on this "
                                   "machine, and readable by you?)") from None
    keyboard = sys.stdin.fileno()
    with _raw(keyboard) as raw:
        if raw:  # (a wait for input is said here only: the operator sees each prompt as it comes)
            asking = data.get("waiting_for_input")
            _say(f"[attached to {task_id}: ctrl-] detaches" +
                 (f"; it is {asking_line(asking)}" if asking is not None else "") + "]")
        last = _attach_loop(client, task_id, data, follow, keyboard, raw)
    for f in follow:
        f.close()
    if last is None:
        _say(f"[detached from {task_id}; it keeps running]")
        sys.exit(0)
    _say(f"[task {task_id} ended: status={last.get('status')} exit_code={last.get('exit_code')}]")
    sys.exit(task_exit_code(last))


def _attach_loop(client: DaemonClient, task_id: str, data: dict, follow: list[OutputFollower], keyboard: int,
                 raw: bool) -> dict | None:
    """Copy output and keys until the task ends (its last status) or the operator detaches (None)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    look: StatusArgs = {"id": task_id}
    out = sys.stdout.buffer
    reading = True
    checked = time.monotonic()
    told = None  # the wait for input said last (with piped input: once per wait)
    while True:
        for f in follow:
            f.copy(out, crlf=raw and data["stdin"] == "pipe")
        if data.get("status") not in ("pending", "running"):
            return data
        ready = select.select([keyboard] if reading else [], [], [], ATTACH_POLL)[0]
        if ready:
            chunk = os.read(keyboard, 4096)
            if not chunk:  # the piped input ended: a pipe task's input ends too
                reading = False
                if data["stdin"] == "pipe":
                    eof: SendArgs = {"id": task_id, "eof": True, "wait_seconds": 0}
                    client.call("send", eof)
                continue
            typed, detach, _ = chunk.partition(DETACH)
            if typed:
                write: SendArgs = {"id": task_id, "text": decoder.decode(typed), "enter": False, "wait_seconds": 0}
                client.call("send", write)
            if detach:
                return None
        if time.monotonic() - checked >= STATE_EVERY:
            data, checked = client.call("status", look).data, time.monotonic()
            told = _tell_asking(task_id, data, told, raw)


def _tell_asking(task_id: str, data: dict, told: str | None, raw: bool) -> str | None:
    """With piped input, say when the task starts waiting for input; the wait said now (None: not waiting)."""
    asking = data.get("waiting_for_input")
    if not raw and asking is not None and told is None:
        _say(f"[{task_id} is {asking_line(asking)}]")
    return asking


class OutputFollower:
    """One output file, followed from near its end (the last BACKLOG bytes), past a dropped middle
    (cli_tail.KeptCopier: one marker line, never its NULs)."""

    def __init__(self, client: DaemonClient, task_id: str, data: dict, stream: str):
        self.fd = os.open(data[stream]["path"], os.O_RDONLY | os.O_CLOEXEC)
        size = os.fstat(self.fd).st_size
        look: StatusArgs = {"id": task_id}
        self.copier = KeptCopier(self.fd, sys.stdout.buffer, max(0, size - BACKLOG),
                                 lambda: status_gap(client.call("status", look).data, stream))
        self.copier.start(status_gap(data, stream))

    def copy(self, out, crlf: bool) -> None:
        self.copier.out, self.copier.crlf = out, crlf
        self.copier.copy()

    def close(self) -> None:
        os.close(self.fd)


@contextmanager
def _raw(fd: int) -> Iterator[bool]:
    """The operator's terminal in raw mode while attached (keys go to the task as pressed), restored after."""
    if not os.isatty(fd):
        yield False
        return
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _say(line: str) -> None:
    click.echo(("\r\n" if sys.stdout.isatty() else "") + line, err=True)
