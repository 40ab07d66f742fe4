"""The subagent engine: the in-memory map name -> running turn; start / continue / interrupt / status; todos.

The only state is that map, live only as long as the process is (the seed: "no task files"). What a session
did is claude's own transcript (sessions.py); a daemon restart stops whatever runs (the unit's cgroup does so
under systemd; `shutdown()` does it without) and `continue` reattaches to the transcript afterwards.

Claude does not stop two `--resume` runs of one session (both append to one transcript), so the engine does:
a name is reserved in the map before anything touches its transcripts, and refused while reserved.

Threads per running turn: a reader (claude's stdout, see claude.py) and a watcher that waits for the exit,
sweeps the group, reaps, decides the outcome and sends the turn's one todo. Timers: the optional turn timeout
and the SIGKILL that follows a soft interrupt after `kill_grace`.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import stat
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Mapping

from common.config import SubagentSettings
from common.names import InvalidName, check_name
from common.todos import Todos
from common.waiting import WaitSlots, wait_for

from hivesubagent import claude, proctree
from hivesubagent.result_pages import OffsetError, excerpt, page, read_on
from hivesubagent.sessions import LiveSession, SessionStore, Transcript, read_transcript

log = logging.getLogger(__name__)

SOURCE = "subagent"
READER_DRAIN_SECONDS = 5.0  # after claude exits, how long its stdout reader may take to deliver the last lines
AFTER_KILL_SECONDS = 5.0  # after SIGKILL, how long an exit may take to be observed and recorded
LIST_LIMIT = 100
ENDED_KEPT = 1000  # names whose last turn's outcome the engine remembers (what a transcript cannot say)


class SubagentError(Exception):
    """An expected refusal or bad value; the message names the field and the rule (shown to the caller)."""


class TurnState(str, Enum):
    STARTING = "starting"  # the name is reserved; transcripts are being looked up/archived, claude spawned
    RUNNING = "running"
    STOPPING = "stopping"  # we signalled it; waiting for the exit
    ENDED = "ended"  # exited, reaped, outcome decided; already out of the map


# The one table of allowed changes; `_transition` refuses anything else.
TRANSITIONS: dict[TurnState, frozenset[TurnState]] = {
    TurnState.STARTING: frozenset({TurnState.RUNNING, TurnState.ENDED}),
    TurnState.RUNNING: frozenset({TurnState.STOPPING, TurnState.ENDED}),
    TurnState.STOPPING: frozenset({TurnState.ENDED}),
    TurnState.ENDED: frozenset(),
}


def _iso(wall: float | None) -> str | None:
    return None if wall is None else datetime.fromtimestamp(wall, timezone.utc).isoformat(timespec="seconds")


@dataclass(eq=False)
class Turn:
    """One running claude process: a turn of session `name`."""

    name: str
    kind: str  # "start" | "continue"
    session_id: str
    transcript: Path
    model: str | None
    prompt: str
    number: int  # the session's turn number this run will be
    cost_before: float | None  # cumulative cost before this turn (from the transcript)
    budget_usd: float | None = None  # --max-budget-usd of this turn
    archived: list[Path] = field(default_factory=list)  # (start) earlier transcripts of the name it archived
    started_wall: float = field(default_factory=time.time)
    started_mono: float = field(default_factory=time.monotonic)
    state: TurnState = TurnState.STARTING
    spawned: claude.Spawned | None = None
    stream: claude.StreamState = field(default_factory=claude.StreamState)
    sent: dict[str, str] = field(default_factory=dict)  # signal name -> why
    exited: bool = False  # reaped: never signal its pgid again
    outcome: claude.Outcome | None = None
    turn_cost: float | None = None
    total_cost: float | None = None
    ended_mono: float | None = None
    timers: list[threading.Timer] = field(default_factory=list)
    reader: threading.Thread | None = None
    reported: bool = False  # its todo is queued (after ENDED: a continue is never refused once the todo says done)

    @property
    def pid(self) -> int | None:
        return self.spawned.proc.pid if self.spawned else None

    def elapsed(self) -> float:
        end = self.ended_mono if self.ended_mono is not None else time.monotonic()
        return max(0.0, end - self.started_mono)


class SubagentEngine:
    def __init__(self, settings: SubagentSettings, todos: Todos, *, base_env: Mapping[str, str] | None = None):
        self.settings = settings
        self.todos = todos
        workdir = Path(settings.workdir).expanduser()
        if not workdir.is_dir():
            raise ValueError(f"workdir: {workdir} is not an existing directory")
        self.workdir = workdir.resolve()
        try:
            extra = claude.parse_extra_env(settings.extra_env)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        self.env = claude.child_env(os.environ if base_env is None else base_env, extra, self.workdir)
        self.sessions = SessionStore(self.workdir, self.env)
        self.scratch = Path(settings.state_dir).absolute() / "subagent"  # unlinked temp files only (claude.spawn)
        self._turns: dict[str, Turn] = {}
        # The last ended turn per name, oldest first: its outcome as the stream said it (a budget stop, the
        # signals sent), which the transcript does not record. Memory only: after a restart the transcript
        # alone answers.
        self._ended: dict[str, Turn] = {}
        self._cond = threading.Condition()
        self._slots = WaitSlots(max(1, settings.max_inline_waits))
        self._closed = False

    # ------------------------------------------------------------------------------------------ state changes

    def _transition(self, turn: Turn, new: TurnState) -> None:
        """The one place a turn changes state (caller holds the condition); wakes every waiter."""
        if new not in TRANSITIONS[turn.state]:
            raise RuntimeError(f"turn {turn.name}: {turn.state.value} -> {new.value} is not allowed")
        turn.state = new
        if new is TurnState.ENDED:
            turn.ended_mono = time.monotonic()
            if self._turns.get(turn.name) is turn:
                del self._turns[turn.name]
        self._cond.notify_all()

    def _reserve(self, name: str, make: Callable[[], Turn]) -> Turn:
        with self._cond:
            if self._closed:
                raise SubagentError("refused: the daemon is shutting down")
            running = self._turns.get(name)
            if running is not None:
                raise SubagentError(
                    f"refused: {name!r} is running (turn {running.number}, {running.elapsed():.0f}s so far); "
                    f"wait for its todo, check status(name={name!r}) or interrupt(name={name!r})"
                )
            if len(self._turns) >= self.settings.max_running:
                names = ", ".join(sorted(self._turns))
                raise SubagentError(f"refused: max_running={self.settings.max_running} sessions are already running ({names})")
            turn = make()
            self._turns[name] = turn
            return turn

    def _release(self, turn: Turn) -> None:
        """Free a reservation whose claude never ran (a refusal or a failed spawn): nothing to report."""
        with self._cond:
            turn.reported = True
            self._transition(turn, TurnState.ENDED)

    # ------------------------------------------------------------------------------------------ the verbs

    def start(self, name: str, prompt_file: str, model: str | None = None, trigger: str | None = None,
              max_budget_usd: float | None = None) -> dict[str, Any]:
        """Archive a finished session of `name`, start a fresh one; return once claude is confirmed running."""
        name = self._check_name(name)
        prompt = claude.START_NUDGE if trigger is None else self._check_text(trigger, "trigger")
        budget = self._check_budget(max_budget_usd)
        fd = open_prompt_file(prompt_file)
        try:
            session_id = str(uuid.uuid4())
            turn = self._reserve(
                name,
                lambda: Turn(name, "start", session_id, self.sessions.transcript_path(session_id), model, prompt, 1, 0.0, budget),
            )
            try:
                self._refuse_if_live_elsewhere(name=name)
                turn.archived = self.sessions.archive(name)
                for path in turn.archived:
                    log.info("session %s: archived %s", name, path)
                argv = claude.start_argv(self.settings.claude_bin, name, session_id, f"/dev/fd/{fd}", model, budget)
                self._spawn(turn, argv, pass_fds=(fd,))
            except BaseException:
                self._unarchive(turn)
                self._release(turn)
                raise
        finally:
            os.close(fd)
        view = self._confirm(turn)
        view["archived"] = [str(p) for p in turn.archived]
        return view

    def continue_(self, name: str, prompt: str, model: str | None = None, max_budget_usd: float | None = None) -> dict[str, Any]:
        """A new turn of the session named `name` on disk, resumed by its id."""
        name = self._check_name(name)
        prompt = self._check_text(prompt, "prompt")
        budget = self._check_budget(max_budget_usd)

        def make() -> Turn:
            return Turn(name, "continue", "", Path(), model, prompt, 0, None, budget)

        turn = self._reserve(name, make)
        try:
            found = self.sessions.find(name)
            if found is None:
                raise SubagentError(
                    f"name: no session named {name!r} in {self.sessions.project_dir} (start it first; archived ones are not resumed)"
                )
            self._refuse_if_live_elsewhere(session_id=found.session_id)
            turn.session_id, turn.transcript = found.session_id, found.path
            turn.number, turn.cost_before = found.turns + 1, found.cost_usd
            turn.model = model or found.model  # without --model claude keeps the session's last model
            argv = claude.continue_argv(self.settings.claude_bin, found.session_id, model, budget)
            self._spawn(turn, argv)
        except BaseException:
            self._release(turn)
            raise
        return self._confirm(turn)

    def interrupt(self, name: str, force: bool = False) -> dict[str, Any]:
        """SIGINT (or SIGKILL with `force`) to the running turn of `name`; answer with its outcome when it ends
        within the grace period (a soft interrupt becomes SIGKILL after `kill_grace`)."""
        name = self._check_name(name)
        with self._cond:
            turn = self._turns.get(name)
            if turn is None:
                raise SubagentError(f"name: {name!r} is not running (interrupt only reaches a running turn; see status(name={name!r}))")
            wait_for(self._cond, lambda: turn.state is not TurnState.STARTING, 5.0)
            if turn.spawned is None:  # its start was refused or failed while we waited: nothing ran
                raise SubagentError(f"name: {name!r} is not running (its start did not get as far as running claude)")
            self._stop(turn, force=force, reason="interrupt(force=true)" if force else "interrupt")
        window = (AFTER_KILL_SECONDS if force else self.settings.kill_grace + AFTER_KILL_SECONDS)
        self._wait_ended(turn, window)
        return self._view(turn)

    def status(self, name: str | None = None, result_offset: int | None = None) -> dict[str, Any]:
        """One session (running or from its transcript), or every known session when `name` is None.
        With `result_offset`: a page of the last turn's whole result text from that character on."""
        if name is None and result_offset is not None:
            raise SubagentError("result_offset: needs name (it pages one session's last result)")
        if name is not None:
            name = self._check_name(name)
            with self._cond:
                turn = self._turns.get(name)
            if turn is not None:
                if result_offset is not None:
                    raise SubagentError(f"result_offset: {name!r} is running turn {turn.number}; its result can be read once it ends (its todo says so)")
                return self._view(turn)
            found = self.sessions.find(name)
            if found is None:
                raise SubagentError(f"name: no session named {name!r}: not running, and no transcript in {self.sessions.project_dir}")
            view = self._transcript_view(found)
            if result_offset is not None:
                view["result_page"] = self._result_page(found, result_offset)
            return view
        with self._cond:
            running = list(self._turns.values())
        views = [self._view(t) for t in running]
        seen = {t.name for t in running}
        finished = [t for t in self.sessions.list() if t.name and t.name not in seen]
        # Several transcripts may carry one name (made outside the daemon); the newest is the session.
        unique: dict[str, Transcript] = {}
        for t in finished:
            unique.setdefault(t.name, t)
        listed = list(unique.values())
        live = self.sessions.live_sessions()
        views += [self._transcript_view(t, live) for t in listed[:LIST_LIMIT]]
        return {"sessions": views, "running": len(running), "more": max(0, len(listed) - LIST_LIMIT)}

    def shutdown(self) -> None:
        """Stop every running turn: SIGINT, SIGKILL after `kill_grace`; return once all are recorded (bounded)."""
        with self._cond:
            self._closed = True
            turns = list(self._turns.values())
            for turn in turns:
                wait_for(self._cond, lambda: turn.state is not TurnState.STARTING, 5.0)
                self._stop(turn, force=False, reason="daemon shutdown")
            wait_for(self._cond, lambda: not self._turns, self.settings.kill_grace)
            for turn in list(self._turns.values()):
                self._stop(turn, force=True, reason="daemon shutdown")
            # Until every todo is queued, not just every turn ended: the caller flushes the todos next.
            wait_for(self._cond, lambda: all(t.reported for t in turns), AFTER_KILL_SECONDS)
            left = [t.name for t in turns if not t.reported]
        if left:
            log.error("shutdown: turns whose end could not be recorded in time: %s", ", ".join(left))

    def running_names(self) -> list[str]:
        with self._cond:
            return sorted(self._turns)

    # ------------------------------------------------------------------------------------------ checks

    @staticmethod
    def _check_name(name: Any) -> str:
        try:
            return check_name(name, "name")
        except InvalidName as exc:
            raise SubagentError(str(exc)) from None

    def _check_budget(self, value: Any) -> float | None:
        """The turn's --max-budget-usd: the caller's, else the daemon's default (none when unset)."""
        if value is None:
            return self.settings.max_budget_usd
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise SubagentError(f"max_budget_usd: must be a number of US dollars > 0 (got {value!r})")
        return float(value)

    @staticmethod
    def _check_text(value: Any, field_name: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise SubagentError(f"{field_name}: must be a non-empty text (claude -p refuses an empty prompt)")
        if "\0" in value:
            raise SubagentError(f"{field_name}: must not contain NUL characters")
        return value

    def _live_elsewhere(self, name: str | None = None, session_id: str | None = None) -> LiveSession | None:
        """A claude process this daemon did not start (an operator's, or a survivor of a daemon crash without
        systemd) running that session, by claude's own registry."""
        for live in self.sessions.live_sessions():
            if (session_id and live.session_id == session_id) or (name and live.name == name and live.session_id):
                return live
        return None

    def _refuse_if_live_elsewhere(self, name: str | None = None, session_id: str | None = None) -> None:
        """Two writers on one transcript corrupt it: refuse what another claude is running."""
        live = self._live_elsewhere(name, session_id)
        if live is not None:
            raise SubagentError(
                f"refused: session {live.session_id} ({live.name or 'unnamed'}) is running in another claude "
                f"process (pid {live.pid}) that this daemon did not start"
            )

    def _unarchive(self, turn: Turn) -> None:
        """Put back what a start archived when its new session never came to exist (claude failed to spawn,
        or exited before writing a transcript): the name keeps its earlier session."""
        if not turn.archived or turn.transcript.exists():
            return
        for path in turn.archived:
            original = path.with_name(path.name.split(".jsonl", 1)[0] + ".jsonl")
            try:
                try:
                    os.link(path, original)  # never over a transcript that appeared meanwhile
                    os.unlink(path)
                except FileExistsError:
                    raise
                except OSError:  # a filesystem without hard links (as in archive_file)
                    if original.exists():
                        raise FileExistsError(original) from None
                    os.rename(path, original)
                log.info("session %s: the new session did not start; put back %s", turn.name, original)
            except OSError as exc:
                log.warning("session %s: could not put back %s: %s", turn.name, path, exc)
        turn.archived = []

    # ------------------------------------------------------------------------------------------ running a turn

    def _spawn(self, turn: Turn, argv: list[str], pass_fds: tuple[int, ...] = ()) -> None:
        try:
            spawned = claude.spawn(argv, self.workdir, self.env, turn.prompt, self.scratch, pass_fds=pass_fds)
        except OSError as exc:
            raise SubagentError(f"cannot run claude_bin {self.settings.claude_bin!r}: {exc.strerror or exc}") from None
        with self._cond:
            turn.spawned = spawned
            turn.started_mono = time.monotonic()
            self._transition(turn, TurnState.RUNNING)
        log.info("session %s: %s turn %d started (pid %d, session %s)", turn.name, turn.kind, turn.number, spawned.proc.pid, turn.session_id)
        self._safe_todo(lambda: self.todos.clear(turn.name))
        turn.reader = threading.Thread(target=self._read, args=(turn,), name=f"subagent-read-{turn.name}", daemon=True)
        turn.reader.start()
        threading.Thread(target=self._watch, args=(turn,), name=f"subagent-watch-{turn.name}", daemon=True).start()
        if self.settings.turn_timeout:
            self._timer(turn, self.settings.turn_timeout, self._timed_out)

    def _timer(self, turn: Turn, seconds: float, action: Callable[[Turn], None]) -> None:
        timer = threading.Timer(seconds, action, args=(turn,))
        timer.daemon = True
        turn.timers.append(timer)
        timer.start()

    def _confirm(self, turn: Turn) -> dict[str, Any]:
        """Wait (bounded by confirm_wait) for claude's init line or an early exit; then answer."""
        with self._cond:
            wait_for(self._cond, lambda: turn.stream.init_seen or turn.state is TurnState.ENDED, self.settings.confirm_wait)
        return self._view(turn)

    def _read(self, turn: Turn) -> None:
        """Claude's stdout until EOF. Only this thread closes the pipe: closing a buffered reader while another
        thread is blocked in it would block the closer on the buffer's lock."""
        stdout = turn.spawned.proc.stdout
        try:
            for raw in stdout:
                event = turn.stream.feed(raw)
                if event:
                    with self._cond:
                        self._cond.notify_all()
        except (OSError, ValueError):
            pass
        finally:
            stdout.close()

    def _watch(self, turn: Turn) -> None:
        spawned = turn.spawned
        pid = spawned.proc.pid
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # observe the exit; the zombie keeps its pgid
        except ChildProcessError:
            pass
        with self._cond:
            proctree.signal_group(spawned.pgid, signal.SIGKILL)  # leftovers of claude's own group
            returncode = spawned.proc.wait()
            turn.exited = True
            for timer in turn.timers:
                timer.cancel()
        turn.reader.join(READER_DRAIN_SECONDS)
        if turn.reader.is_alive():  # a process claude started (and that left its group) holds the pipe open
            log.warning("session %s: claude exited but its stdout is still open; recording the turn from what was read", turn.name)
        outcome = claude.classify(turn.stream.result, returncode, dict(turn.sent), spawned.stderr_tail(), turn.stream.last_text)
        self._account(turn, outcome)
        spawned.close()
        if turn.kind == "start":
            self._unarchive(turn)  # a no-op once claude wrote the new transcript
        with self._cond:
            turn.outcome = outcome
            self._ended.pop(turn.name, None)
            self._ended[turn.name] = turn
            while len(self._ended) > ENDED_KEPT:
                self._ended.pop(next(iter(self._ended)))
            self._transition(turn, TurnState.ENDED)
        log.info(
            "session %s: turn %d %s (%s) after %.1fs, rc=%s", turn.name, turn.number, outcome.kind, outcome.detail, turn.elapsed(), returncode
        )
        summary, body, data = self._todo(turn)
        self._safe_todo(lambda: self.todos.upsert(turn.name, summary, body, data))
        with self._cond:
            turn.reported = True
            self._cond.notify_all()

    def _account(self, turn: Turn, outcome: claude.Outcome) -> None:
        """This turn's cost: claude's cumulative total after it minus the one before (transcript if no result)."""
        total = outcome.cost_usd
        if total is None:
            try:
                total = read_transcript(turn.transcript).cost_usd
            except OSError:
                total = None
        turn.total_cost = total
        if total is not None:
            turn.turn_cost = max(0.0, total - (turn.cost_before or 0.0))

    def _safe_todo(self, action: Callable[[], Any]) -> None:
        try:
            action()
        except Exception:  # a todo must never take a turn down with it
            log.exception("todo delivery failed")

    # ------------------------------------------------------------------------------------------ stopping

    def _stop(self, turn: Turn, force: bool, reason: str) -> None:
        """Signal a turn (caller holds the condition). Never after it was reaped: its pgid may be reused."""
        if turn.exited or turn.spawned is None:
            return
        if force:
            turn.sent["SIGKILL"] = reason
            killed = proctree.kill_tree(turn.spawned.proc.pid, turn.spawned.pgid)
            log.info("session %s: SIGKILL (%s), %d process(es) signalled", turn.name, reason, killed)
        else:
            first = "SIGINT" not in turn.sent
            turn.sent.setdefault("SIGINT", reason)
            proctree.signal_group(turn.spawned.pgid, signal.SIGINT)
            log.info("session %s: SIGINT (%s)", turn.name, reason)
            if first:
                self._timer(turn, self.settings.kill_grace, self._escalate)
        if turn.state is TurnState.RUNNING:
            self._transition(turn, TurnState.STOPPING)

    def _escalate(self, turn: Turn) -> None:
        with self._cond:
            if not turn.exited:
                self._stop(turn, force=True, reason=f"still running {self.settings.kill_grace:g}s after SIGINT")

    def _timed_out(self, turn: Turn) -> None:
        with self._cond:
            if not turn.exited and "SIGINT" not in turn.sent and "SIGKILL" not in turn.sent:
                self._stop(turn, force=False, reason=f"turn_timeout={self.settings.turn_timeout:g}s")

    def _wait_ended(self, turn: Turn, seconds: float) -> bool:
        if not self._slots.try_acquire():
            return turn.state is TurnState.ENDED  # every wait slot is busy: answer with the state as it is
        try:
            with self._cond:
                return wait_for(self._cond, lambda: turn.state is TurnState.ENDED, seconds)
        finally:
            self._slots.release()

    # ------------------------------------------------------------------------------------------ views

    def _view(self, turn: Turn) -> dict[str, Any]:
        with self._cond:
            view: dict[str, Any] = {
                "name": turn.name,
                "state": turn.state.value,
                "running": turn.state is not TurnState.ENDED,
                "session_id": turn.session_id,
                "transcript": str(turn.transcript),
                "kind": turn.kind,
                "turn": turn.number,
                "pid": turn.pid,
                "model": turn.stream.model or turn.model,  # None: not known yet (claude's default, no init line)
                "started_at": _iso(turn.started_wall),
                "elapsed_s": round(turn.elapsed(), 3),
                "confirmed": turn.stream.init_seen,
                "signals": dict(turn.sent),
                "turns_done": max(0, turn.number - 1),
                "total_cost_usd": turn.cost_before,  # claude records cost at a turn's end: this is up to the last one
                "max_budget_usd": turn.budget_usd,
                "progress": turn.stream.progress.view(),
            }
            if turn.outcome is not None:
                view["outcome"] = self._outcome_data(turn)
        return view

    def _outcome_data(self, turn: Turn) -> dict[str, Any]:
        o = turn.outcome
        total_chars = max(len(o.result_text), turn.stream.result_chars if turn.stream.result else 0)
        start = excerpt(o.result_text, self.settings.result_chars)
        return {
            "outcome": o.kind,
            "detail": o.detail,
            "exited_without_result": o.exited_without_result,
            "returncode": o.returncode,
            "result_text": start.text,
            "result_chars": total_chars,
            "result_next_offset": len(start.text) if len(start.text) < total_chars else None,
            "cost_usd": turn.turn_cost,
            "total_cost_usd": turn.total_cost,
            "max_budget_usd": turn.budget_usd,
            "duration_s": round(turn.elapsed(), 3),
            **{k: v for k, v in o.extra.items() if k in ("terminal_reason", "api_error_status", "num_turns")},
        }

    def _remembered(self, t: Transcript) -> Turn | None:
        """This engine's own record of the transcript's last turn, if it ran it and nothing ran since."""
        with self._cond:
            turn = self._ended.get(t.name or "")
        if turn is None or turn.session_id != t.session_id or turn.number != t.turns or turn.outcome is None:
            return None
        return turn

    def _transcript_view(self, t: Transcript, live: list[LiveSession] | None = None) -> dict[str, Any]:
        last = t.last_turn
        view: dict[str, Any] = {
            "name": t.name,
            "state": "finished",
            "running": False,
            "session_id": t.session_id,
            "transcript": str(t.path),
            "model": t.model,
            "turns": t.turns,
            "total_cost_usd": t.cost_usd,
            "updated_at": _iso(t.last_at or t.mtime),
        }
        other = next((s for s in (self.sessions.live_sessions() if live is None else live) if s.session_id == t.session_id), None)
        if other is not None:
            # Not ours, but running: say so as continue does (which refuses it), with its pid.
            view.update(state="running", running=True, pid=other.pid, started_by="another claude process, not this daemon")
        if last is not None:
            start = excerpt(last.result_text, self.settings.result_chars)
            view["last_turn"] = {
                "outcome": "interrupted" if last.outcome == "no_result" else last.outcome,
                "exited_without_result": last.outcome == "no_result",
                "result_text": start.text,
                "result_chars": start.total_chars,
                "result_next_offset": start.next_offset,
                "cost_usd": last.cost_usd,
                "duration_s": None if last.duration_seconds is None else round(last.duration_seconds, 3),
                "started_at": _iso(last.started_at),
            }
            ours = self._remembered(t)
            if ours is not None and other is None:
                o = ours.outcome
                view["last_turn"].update(outcome=o.kind, detail=o.detail, exited_without_result=o.exited_without_result,
                                         max_budget_usd=ours.budget_usd, cost_usd=ours.turn_cost,
                                         **{k: v for k, v in o.extra.items() if k in ("terminal_reason", "api_error_status")})
        return view

    def _result_page(self, t: Transcript, offset: int) -> dict[str, Any]:
        """A page of the last turn's whole result, read from claude's transcript (so it survives a restart)."""
        text = t.last_turn.result_text if t.last_turn is not None else ""
        ours = self._remembered(t)
        if not text and ours is not None:
            text = ours.outcome.result_text  # a turn whose only text came in the stream (an error's result line)
        try:
            return page(text, offset).as_dict()
        except OffsetError as exc:
            raise SubagentError(str(exc)) from None

    def _todo(self, turn: Turn) -> tuple[str, str, dict[str, Any]]:
        """The one todo of a finished turn: outcome, start of the result, cost, how to go on."""
        data = self._view(turn)
        o = data["outcome"]
        cost = "" if o["cost_usd"] is None else f", ${o['cost_usd']:.4f}"
        summary = f"subagent {turn.name}: turn {turn.number} {o['outcome']}{cost}"
        facts = (
            f"outcome={o['outcome']} name={turn.name} session_id={turn.session_id} turn={turn.number} "
            f"cost_usd={_num(o['cost_usd'])} total_cost_usd={_num(o['total_cost_usd'])} duration_s={o['duration_s']:.1f}"
        )
        if turn.budget_usd is not None:
            facts += f" max_budget_usd={claude.format_usd(turn.budget_usd)}"
        lines = [facts, f"detail: {o['detail']}"]
        if o["result_text"]:
            shown = len(o["result_text"])
            lines += [f"result ({shown} of {o['result_chars']} characters):" if o["result_next_offset"] else "result:", o["result_text"]]
            if o["result_next_offset"]:
                lines.append(read_on(turn.name, o["result_next_offset"], o["result_chars"]))
        more = ', max_budget_usd=...' if o["outcome"] == "budget_exceeded" else ""
        lines += [
            "",
            f'next: continue(name="{turn.name}", prompt="..."{more}) gives it another turn; '
            f'start(name="{turn.name}", ...) archives this session and starts afresh.',
            f"transcript: Read({turn.transcript})",
        ]
        return summary, "\n".join(lines), data


def _num(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.6f}"


def open_prompt_file(path: Any) -> int:
    """Open `prompt_file` for claude: an absolute path to an existing, readable regular file.

    Opened with O_NONBLOCK, then fstat'ed: a FIFO never blocks the daemon (open of a FIFO for reading would
    wait for a writer), and what is checked is what claude reads: it gets this very descriptor as /dev/fd/N,
    so the file cannot be swapped between the check and the read. A symlink to a regular file is fine."""
    if not isinstance(path, str) or not path:
        raise SubagentError("prompt_file: must be a non-empty path")
    if "\0" in path:
        raise SubagentError("prompt_file: must not contain NUL characters")
    if not os.path.isabs(path):
        raise SubagentError(f"prompt_file: {path!r} must be an absolute path")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SubagentError(f"prompt_file: {path} does not exist") from None
    except PermissionError:
        raise SubagentError(f"prompt_file: {path} is not readable (permission denied)") from None
    except IsADirectoryError:
        raise SubagentError(f"prompt_file: {path} is a directory, not a regular file") from None
    except OSError as exc:
        raise SubagentError(f"prompt_file: cannot open {path}: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}.get(stat.S_IFMT(mode), "not a regular file")
        raise SubagentError(f"prompt_file: {path} is {kind}, not a regular file")
    os.set_blocking(fd, True)
    return fd
