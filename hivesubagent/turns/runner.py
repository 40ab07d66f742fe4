"""Running one reserved turn: spawn claude, read its stream, watch for its exit, signal it, record its end.

Threads per running turn: a reader (claude's stdout, see claude.py) and a watcher that waits for the exit,
sweeps the group, reaps, decides the outcome and sends the turn's one todo. Timers: the turn's time limit, the
stall check (stall.py) and the SIGKILL that follows a soft interrupt after `kill_grace`.

A turn's `reap_lock` is held while its group is signalled or its leader reaped, so a pgid is never signalled
once recycled (an unreaped zombie keeps it reserved). It is always taken before the table's `cond`, never
while holding it; signalling (stop_tree reads /proc) therefore never happens under `cond`.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from common.config import SubagentSettings
from common.event_log import event
from common.process_seam import ProcessOps, stop_tree
from common.todos import Todos
from hivesubagent.answers.shapes import WorkData
from hivesubagent.errors import SubagentError
from hivesubagent.places.worktrees import Worktrees
from hivesubagent.transcripts.transcript import read_transcript
from hivesubagent.turns import claude, views
from hivesubagent.turns import turn as T
from hivesubagent.turns.stall import StallWatch
from hivesubagent.turns.table import TurnTable
from hivesubagent.turns.turn import Turn
from hivesubagent.turns.work import turn_work_data

log = logging.getLogger(__name__)

READER_DRAIN_SECONDS = 5.0  # after claude exits, how long its stdout reader may take to deliver the last lines


class TurnRunner:
    def __init__(self, table: TurnTable, settings: SubagentSettings, todos: Todos, workdir: Path,
                 env: Mapping[str, str], scratch: Path, ops: ProcessOps, worktrees: Worktrees | None = None):
        self.table = table
        self.ops = ops  # every process operation (common/process_seam.py)
        self.settings = settings
        self.todos = todos
        self.workdir = workdir
        self.env = env
        self.scratch = scratch  # unlinked temp files only (claude.spawn)
        self.worktrees = worktrees  # measures a worktree session's work at each turn's end
        # How long an end's todo waits for a client's poll of its task (turns/tasks.py sets it); 0: not at all.
        self.hold: Callable[[Turn], float] = lambda turn: 0.0
        self.stalls = StallWatch(table, settings, todos,
                                 lambda turn, why: self.stop(turn, False, why, unless_signalled=True), self._safe_todo)

    def cwd_of(self, turn: Turn) -> Path:
        return turn.place.cwd if turn.place is not None else self.workdir

    def spawn(self, turn: Turn, argv: list[str], pass_fds: tuple[int, ...] = ()) -> None:
        """Start claude for a reserved turn, then its reader, watcher and timeout; raise SubagentError when
        claude_bin cannot run (the caller releases the reservation)."""
        start = _size(turn.transcript)  # (a continue's; a start's transcript does not exist yet)
        try:
            cwd = self.cwd_of(turn)
            spawned = claude.spawn(self.ops, argv, cwd, {**self.env, "PWD": str(cwd)}, turn.prompt, self.scratch,
                                   pass_fds=pass_fds)
        except OSError as exc:
            raise SubagentError(f"cannot run claude_bin {self.settings.claude_bin!r}: {exc.strerror or exc}") from None
        reader = threading.Thread(target=self._read, args=(turn,), name=f"subagent-read-{turn.name}", daemon=True)
        with self.table.cond:
            turn.spawned = spawned
            turn.reader = reader
            turn.transcript_start = start
            turn.started_mono = time.monotonic()
            self.table.transition_locked(turn, T.RUNNING)
        event(log, "turn_start", name=turn.name, kind=turn.kind, turn=turn.number, pid=spawned.proc.pid,
              session=turn.session_id)
        self._safe_todo(lambda: self.todos.clear(turn.name))
        reader.start()
        threading.Thread(target=self._watch, args=(turn,), name=f"subagent-watch-{turn.name}", daemon=True).start()
        if turn.bounds.timeout_s:
            self._start_timer(turn, turn.bounds.timeout_s, self._timed_out)
        self.stalls.arm(turn)

    def stop(self, turn: Turn, force: bool, reason: str, unless_signalled: bool = False) -> None:
        """SIGINT (a kill_grace timer then escalates) or SIGKILL to the turn's whole tree; nothing once it was
        reaped. `unless_signalled`: nothing when a signal was already sent (the turn timeout).

        Claude's Bash tool runs each command in a session of its own (2.1.328), so a signal to claude's group
        never reaches it: on SIGINT claude stops its tools itself; after SIGKILL it cannot, so a forced stop is
        the seam's `stop_tree` (claude's descendants found before its group dies, each killed by pidfd)."""
        with turn.reap_lock:
            if turn.exited or turn.spawned is None:
                return
            with self.table.cond:
                if unless_signalled and turn.sent:
                    return
                first_sigint = self._record_signal_locked(turn, force, reason)
            if force:
                killed = stop_tree(self.ops, turn.spawned.proc.pid, turn.spawned.pgid)
            else:
                self.ops.signal_group(turn.spawned.pgid, signal.SIGINT)
        if force:
            log.info("session %s: SIGKILL (%s), %d process(es) signalled", turn.name, reason, killed)
        else:
            log.info("session %s: SIGINT (%s)", turn.name, reason)
        if first_sigint:
            self._start_timer(turn, self.settings.kill_grace, self._escalate)

    def _record_signal_locked(self, turn: Turn, force: bool, reason: str) -> bool:
        """Note the signal about to be sent and why; True for a turn's first SIGINT (it needs an escalation)."""
        first_sigint = not force and "SIGINT" not in turn.sent
        if force:
            turn.sent["SIGKILL"] = reason
        else:
            turn.sent.setdefault("SIGINT", reason)
        if turn.state == T.RUNNING:
            self.table.transition_locked(turn, T.STOPPING)
        return first_sigint

    def _escalate(self, turn: Turn) -> None:
        self.stop(turn, force=True, reason=f"still running {self.settings.kill_grace:g}s after SIGINT")

    def _timed_out(self, turn: Turn) -> None:
        """The turn's time limit passed: SIGINT (SIGKILL after the grace), and its outcome becomes timed_out."""
        with self.table.cond:
            if turn.sent or turn.state != T.RUNNING:
                return  # already being stopped (an interrupt, shutdown) or ended: not a timeout
            turn.timed_out = True
        self.stop(turn, force=False, reason=f"timeout_minutes={turn.bounds.timeout_minutes:g}", unless_signalled=True)

    def _start_timer(self, turn: Turn, seconds: float, action: Callable[[Turn], None]) -> None:
        """Started outside `cond`; a timer that fires after the turn was reaped finds `exited` and does nothing."""
        timer = threading.Timer(seconds, action, args=(turn,))
        timer.daemon = True
        with self.table.cond:
            turn.timers.append(timer)
        timer.start()

    def _read(self, turn: Turn) -> None:
        """Claude's stdout until EOF. Only this thread closes the pipe: closing a buffered reader while another
        thread is blocked in it would block the closer on the buffer's lock."""
        stdout = turn.spawned.proc.stdout if turn.spawned is not None else None
        assert stdout is not None, "the reader starts once claude is spawned with a stdout pipe"
        try:
            for raw in stdout:
                if turn.stream.feed(raw):
                    with self.table.cond:
                        self.table.changed_locked()
                if turn.stall_reported is not None:  # (re-checked under the lock)
                    self.stalls.resumed(turn)
        except (OSError, ValueError):
            pass
        finally:
            stdout.close()

    def _watch(self, turn: Turn) -> None:
        spawned, reader = turn.spawned, turn.reader
        assert spawned is not None and reader is not None, "the watcher starts after the spawn and the reader"
        exit_fd = self.ops.exit_fd(spawned.proc)
        try:
            select.select([exit_fd], [], [])  # observe the exit without reaping: the zombie keeps its pgid
        finally:
            os.close(exit_fd)
        with turn.reap_lock:
            self.ops.signal_group(spawned.pgid, signal.SIGKILL)  # leftovers of claude's own group
            status, _ = self.ops.reap(spawned.proc)
            returncode = os.waitstatus_to_exitcode(status)  # as Popen says it: -N for a death by signal N
            turn.exited = True
        with self.table.cond:
            timers, sent = list(turn.timers), dict(turn.sent)
        for timer in timers:
            timer.cancel()
        reader.join(READER_DRAIN_SECONDS)
        if reader.is_alive():  # a process claude started (and that left its group) holds the pipe open
            log.warning("session %s: claude exited but its stdout is still open; recording the turn from what was read",
                        turn.name)
        outcome = claude.classify(turn.stream.result, returncode, sent, spawned.stderr_tail(), turn.stream.last_text)
        if turn.timed_out and outcome.kind in ("interrupted", "killed"):
            outcome = replace(outcome, kind="timed_out",
                              detail=f"reached its time limit ({turn.bounds.timeout_minutes:g} min): {outcome.detail}")
        turn_cost, total_cost = self._cost(turn, outcome)
        work = turn_work_data(turn.transcript, self.cwd_of(turn), turn.transcript_start)
        if turn.place is not None and turn.place.worktree is not None and self.worktrees is not None:
            turn.worktree_stat = self.worktrees.stat(turn.place.worktree)  # (before the end)
        spawned.close()
        if turn.kind == "start":
            unarchive(turn)  # a no-op once claude wrote the new transcript
        self._record_end(turn, outcome, turn_cost, total_cost, work)
        # Not the outcome's detail: it may quote claude's stderr.
        event(log, "turn_end", name=turn.name, turn=turn.number, outcome=outcome.kind, seconds=turn.elapsed(),
              exit_code=returncode, cost_usd=turn_cost)

    def _record_end(self, turn: Turn, outcome: claude.TurnEnd, turn_cost: float | None, total_cost: float | None,
                    work: WorkData | None) -> None:
        """The turn ends (waiters wake), then its one todo is queued and it counts as reported."""
        with self.table.cond:
            turn.outcome, turn.turn_cost, turn.total_cost, turn.work = outcome, turn_cost, total_cost, work
            self.table.remember_ended_locked(turn)
            self.table.transition_locked(turn, T.ENDED)
            data = views.turn_view(turn, self.settings.result_chars)
        summary, body = views.turn_todo(turn, data)
        hold = self.hold(turn)
        with self.table.cond:
            if hold:  # a client polls this turn's task: its poll is the notice, if it comes soon
                self.table.wait_locked(lambda: turn.delivered or self.table.closed, hold)
            turn.todo_sent = not turn.delivered
        if turn.todo_sent:
            self._safe_todo(lambda: self.todos.upsert(turn.name, summary, body, data))
        with self.table.cond:
            turn.reported = True
            self.table.changed_locked()

    @staticmethod
    def _cost(turn: Turn, outcome: claude.TurnEnd) -> tuple[float | None, float | None]:
        """This turn's cost and the session's total: claude's cumulative total after it minus the one before.
        Without a result line the transcript's total counts only if it moved: a turn interrupted before claude
        recorded its spending left the earlier total there, and its own cost is unknown (never 0)."""
        total = outcome.cost_usd
        if total is None:
            try:
                total = read_transcript(turn.transcript).cost_usd
            except OSError:
                total = None
            if total is not None and total <= (turn.cost_before or 0.0):
                total = None
        if total is None:
            return None, None
        return max(0.0, total - (turn.cost_before or 0.0)), total

    @staticmethod
    def _safe_todo(action: Callable[[], Any]) -> None:
        try:
            action()
        except Exception:  # a todo must never take a turn down with it
            log.exception("todo delivery failed")


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def unarchive(turn: Turn) -> None:
    """Put back what a start archived when its new session never came to exist (claude failed to spawn, or
    exited before writing a transcript): the name keeps its earlier session."""
    if turn.archived and not turn.transcript.exists():
        for path in turn.archived:
            _restore_archived(turn.name, path)
        turn.archived = []  # only when put back: a start's answer, read after a quick turn ended, still lists them


def _restore_archived(name: str, path: Path) -> None:
    """Move an archived transcript back to its own name, never over a transcript that appeared meanwhile."""
    original = path.with_name(path.name.split(".jsonl", 1)[0] + ".jsonl")
    try:
        try:
            os.link(path, original)
            os.unlink(path)
        except FileExistsError:
            raise
        except OSError:  # a filesystem without hard links (as in archive_file)
            if original.exists():
                raise FileExistsError(original) from None
            os.rename(path, original)
        log.info("session %s: the new session did not start; put back %s", name, original)
    except OSError as exc:
        log.warning("session %s: could not put back %s: %s", name, path, exc)
