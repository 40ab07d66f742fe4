"""The subagent engine: the tools' verbs (start, continue, interrupt, status) and shutdown.

The only state is the turn table (turns.py), live only as long as the process is (no task files): what a
session did is claude's own transcript (sessions.py). A daemon restart stops whatever runs (the unit's cgroup
does so under systemd; `shutdown()` does it without) and `continue` reattaches to the transcript afterwards.

Rooms: turn.py (a turn and its state table), turns.py (the table and its one condition), runner.py (spawn,
watch, signal, record the end), views.py (what the tools and todos say), requests.py (the checks). Locks and
states are described in docs/design.md, "Threads and locks" and "States".
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from common.config import SubagentSettings
from common.notices import Notices
from common.process_seam import LinuxProcessOps, ProcessOps
from common.protocol.call_progress import NO_PROGRESS, Cancellation, ProgressReporter
from common.todos import Todos
from common.waiting import WaitSlots
from hivesubagent.answers.pages import OffsetError, page
from hivesubagent.answers.shapes import (
    PageData,
    SessionAnswer,
    SessionList,
    SessionView,
    Steps,
    TurnView,
    WaitedSessions,
)
from hivesubagent.answers.texts import render_session, turn_result
from hivesubagent.errors import SubagentError
from hivesubagent.places.book import Place, PlaceBook
from hivesubagent.places.finder import SessionPlaces
from hivesubagent.places.worktrees import Worktrees
from hivesubagent.requests import (
    StatusRequest,
    check_continue,
    check_interrupt,
    check_start,
    check_status,
    cwd_roots,
    open_prompt_file,
)
from hivesubagent.transcripts.index_file import IndexKeeper
from hivesubagent.transcripts.log import last_turn_page
from hivesubagent.transcripts.sessions import LiveSession, SessionStore, Transcript
from hivesubagent.turns import claude, views, waits
from hivesubagent.turns import turn as T
from hivesubagent.turns.runner import TurnRunner, unarchive
from hivesubagent.turns.table import TurnTable
from hivesubagent.turns.tasks import TurnTasks
from hivesubagent.turns.turn import Turn
from hivesubagent.turns.work import turn_work_data

__all__ = ["SOURCE", "SubagentEngine", "SubagentError", "open_prompt_file"]

log = logging.getLogger(__name__)

SOURCE = "subagent"
AFTER_KILL_SECONDS = 5.0  # after SIGKILL, how long an exit may take to be observed and recorded
STARTING_WAIT_SECONDS = 5.0  # how long interrupt/shutdown wait for a turn still being spawned
LIST_LIMIT = 100


def _unknown(field: str, name: str, places: SessionPlaces, table: TurnTable, continuing: bool = False) -> SubagentError:
    """The refusal for a name that is neither running nor in a transcript. Where this daemon ran the name's
    first turn and claude ended before it wrote its transcript (stopped in its first seconds: a short timeout on
    a loaded machine), it says what became of that turn."""
    where = places.project_dir(name)
    with table.cond:
        ended = table.last_ended_locked(name)
    if ended is not None and ended.outcome is not None and views.wrote_no_transcript(ended):
        return SubagentError(f"{field}: no session named {name!r}: its turn {ended.number} ended "
                             f"({ended.outcome.kind}: {ended.outcome.detail}) before claude wrote a transcript in "
                             f"{where}, so there is nothing to show or continue; start(name={name!r}, ...) "
                             "begins it again")
    if continuing:
        return SubagentError(f"name: no session named {name!r} in {where} (start it first; archived ones are not "
                             "resumed)")
    return SubagentError(f"{field}: no session named {name!r}: not running, and no transcript in {where}")


def refuse_if_live_elsewhere(sessions: SessionStore, name: str | None = None, session_id: str | None = None) -> None:
    """Claude runs that this daemon did not start (an operator's, or a survivor of a daemon crash without
    systemd) are refused too: two writers on one transcript corrupt it."""
    for live in sessions.live_sessions():
        if (session_id and live.session_id == session_id) or (name and live.name == name and live.session_id):
            raise SubagentError(
                f"refused: session {live.session_id} ({live.name or 'unnamed'}) is running in another claude "
                f"process (pid {live.pid}) that this daemon did not start"
            )


class SubagentEngine:
    def __init__(self, settings: SubagentSettings, todos: Todos, *, base_env: Mapping[str, str] | None = None,
                 ops: ProcessOps | None = None):
        """`ops`: every process operation of the turns (tests pass a recording fake)."""
        self.settings = settings
        self.todos = todos
        workdir = Path(settings.workdir).expanduser()
        if not workdir.is_dir():
            raise ValueError(f"workdir: {workdir} is not an existing directory")
        self.workdir = workdir.resolve()
        extra = claude.parse_extra_env(settings.extra_env)
        self.env = claude.child_env(os.environ if base_env is None else base_env, extra, self.workdir)
        self.sessions = SessionStore(self.workdir, self.env)
        state = Path(settings.state_dir).absolute()
        self.cwd_roots = cwd_roots(settings.allowed_cwd_roots, self.workdir)
        self.worktrees = Worktrees(state / "worktrees", self.env, state / "subagent", self.cwd_roots)
        self.places = SessionPlaces(self.sessions, PlaceBook(state), self.worktrees)
        self.index_keeper = IndexKeeper(self.sessions, Path(settings.state_dir))
        if not self.index_keeper.start():
            log.info("transcripts still being indexed in the background (a first start on a large folder)")
        self.notices = Notices.for_socket(settings.agent_socket)  # else no todo reaches the agent: no text promises one
        self.table = TurnTable(settings.max_running, self.notices)
        self.runner = TurnRunner(self.table, settings, todos, self.workdir, self.env,
                                 Path(settings.state_dir).absolute() / "subagent",
                                 ops if ops is not None else LinuxProcessOps(), self.worktrees)
        self.slots = WaitSlots(max(1, settings.max_inline_waits))
        self.tasks = turn_tasks(self)

    # ------------------------------------------------------------------------------------------ the verbs

    def start(self, name: Any = None, prompt_file: Any = None, **args: Any) -> TurnView:
        """Archive a finished session of `name`, start a fresh one (in its `cwd`, in a worktree of its own);
        return once claude is confirmed running."""
        request = check_start(_with(args, name=name, prompt_file=prompt_file), self.settings, self.workdir,
                              self.cwd_roots)
        name, bounds = request.name, request.bounds
        fd = open_prompt_file(request.prompt_file)
        try:
            session_id = str(uuid.uuid4())
            turn = self.table.reserve(name, lambda: Turn(name, "start", session_id, Path(), request.model,
                                                         request.prompt, 1, 0.0, bounds))
            old = self.places.book.get(name)
            try:
                refuse_if_live_elsewhere(self.sessions, name=name)
                place = self.places.new_place(name, request.cwd, request.worktree, request.options, old)
                with self.table.cond:
                    turn.transcript = self.places.store(place.cwd).transcript_path(session_id)
                    turn.place = None if place == Place(self.workdir) else place
                turn.archived = self.places.archive(name, place.cwd)
                for path in turn.archived:
                    log.info("session %s: archived %s", name, path)
                self.places.book.put(name, turn.place)
                argv = claude.start_argv(self.settings.claude_bin, name, session_id, f"/dev/fd/{fd}", request.model,
                                         bounds.budget_usd, bounds.max_turns, request.options)
                self.runner.spawn(turn, argv, pass_fds=(fd,))
            except BaseException:
                unarchive(turn)
                self.places.put_back(name, old)
                self.table.release(turn)
                raise
        finally:
            os.close(fd)
        view = self._confirm(turn)
        view["archived"] = [str(p) for p in turn.archived]
        return view

    def continue_(self, name: Any = None, prompt: Any = None, **args: Any) -> TurnView:
        """A new turn of the session named `name` on disk, resumed by its id, where the session runs; options
        given replace the session's own for this turn only."""
        request = check_continue(_with(args, name=name, prompt=prompt), self.settings)
        name, model, bounds = request.name, request.model, request.bounds
        turn = self.table.reserve(name, lambda: Turn(name, "continue", "", Path(), model, request.prompt, 0, None,
                                                     bounds))
        try:
            place, found = self.places.place(name), self.places.find(name)
            if found is None:
                raise _unknown("name", name, self.places, self.table, continuing=True)
            self.places.check_still_there(name, place)
            refuse_if_live_elsewhere(self.sessions, session_id=found.session_id)
            options = request.options.over(place.options)
            with self.table.cond:
                turn.session_id, turn.transcript = found.session_id, found.path
                turn.number, turn.cost_before = found.turns + 1, found.cost_usd
                turn.model = model or found.model  # without --model claude keeps the session's last model
                turn.place = None if place == Place(self.workdir, None, options) else Place(
                    place.cwd, place.worktree, options)
            argv = claude.continue_argv(self.settings.claude_bin, found.session_id, model, bounds.budget_usd,
                                        bounds.max_turns, options)
            self.runner.spawn(turn, argv)
        except BaseException:
            self.table.release(turn)
            raise
        return self._confirm(turn)

    def interrupt(self, name: Any = None, **args: Any) -> TurnView:
        """SIGINT (or SIGKILL with `force`) to the running turn of `name`; answer with its outcome when it ends
        within the grace period (a soft interrupt becomes SIGKILL after `kill_grace`). Its `wait` says how the
        wait went: with every inline-wait slot taken it answers at once (`skipped`)."""
        request = check_interrupt(_with(args, name=name))
        name, force = request.name, request.force
        with self.table.cond:
            turn = self.table.running_locked(name)
            if turn is None:
                raise SubagentError(f"name: {name!r} is not running (interrupt only reaches a running turn; "
                                    f"see status(name={name!r}))")
            self.table.wait_locked(lambda: turn.state != T.STARTING, STARTING_WAIT_SECONDS)
            if turn.spawned is None:  # its start was refused or failed while we waited: nothing ran
                raise SubagentError(f"name: {name!r} is not running (its start did not get as far as running claude)")
        self.runner.stop(turn, force=force, reason="interrupt(force=true)" if force else "interrupt")
        grace = self.settings.kill_grace
        wait = waits.wait_stopped(self.table, turn, AFTER_KILL_SECONDS + (0 if force else grace), self.slots, grace)
        view = self._view(turn)
        view["wait"] = wait
        return view

    def status(self, name: str | None = None, result_offset: int | None = None) -> SessionList | SessionAnswer:
        """One session (running or from its transcript), or every known session when `name` is None.
        With `result_offset`: a page of the last turn's whole result text from that character on."""
        return self.sessions_of(check_status(_with({}, name=name, result_offset=result_offset)))

    def sessions_of(self, request: StatusRequest) -> SessionList | SessionAnswer:
        """A `list` or `one` status request's answer."""
        if request.kind == "one":
            return self._status_of(request.names[0], request.result_offset)
        with self.table.cond:
            running = [views.turn_view(t, self.settings.result_chars) for t in self.table.running_locked()]
        seen = {v["name"] for v in running}
        # Several transcripts may carry one name (made outside the daemon); the newest is the session.
        listed = [(named, t) for named, t in self.places.named() if named not in seen]
        live = self.sessions.live_sessions()
        finished: list[SessionAnswer] = [self._transcript_view(t, named, live) for named, t in listed[:LIST_LIMIT]]
        return {"sessions": [*running, *finished], "running": len(running), "more": max(0, len(listed) - LIST_LIMIT)}

    def wait_status(self, names: list[str], wait_seconds: float | None = None, want_all: bool = False,
                    progress: ProgressReporter = NO_PROGRESS, cancel: Cancellation | None = None) -> WaitedSessions:
        """`status(names=[...], wait_seconds=N, all=...)`: see `waited`."""
        request = check_status(_with({}, names=names, wait_seconds=wait_seconds, all=want_all or None))
        return self.waited(request, progress, cancel)

    def waited(self, request: StatusRequest, progress: ProgressReporter = NO_PROGRESS,
               cancel: Cancellation | None = None) -> WaitedSessions:
        """A `wait` status request: wait (capped at 30 s) until the first of the named turns running now ends
        (with `every`, each one), then each session's view. A session already finished before the call does
        not end the wait; with none running it answers at once. `progress` and `cancel` are the call's
        (common/protocol/call_progress.py)."""
        names = request.names
        with self.table.cond:
            turns = [t for n in names if (t := self.table.running_locked(n)) is not None]
        running = {t.name for t in turns}
        for name in names:
            if name not in running and self.places.find(name) is None:
                raise _unknown("names", name, self.places, self.table)
        waited = waits.wait_turns(self.table, turns, request.every, request.window, self.slots, progress, cancel)
        return {"sessions": [self._status_of(n, None) for n in names], "wait": waited.as_dict()}

    def steps(self, name: str, offset: int = 0) -> Steps:
        """`status(name, steps=true)`: see `steps_of`."""
        return self.steps_of(check_status({"name": name, "steps": True, "steps_offset": offset}))

    def steps_of(self, request: StatusRequest) -> Steps:
        """A `steps` status request: a page of the session's last turn as readable steps (hive-subagent log's
        rendering), read from claude's transcript, running or not."""
        name, offset = request.names[0], request.steps_offset
        with self.table.cond:
            turn = self.table.running_locked(name)
            path, running = (turn.transcript, True) if turn is not None and turn.spawned is not None else (None, False)
        if path is None:
            found = self.places.find(name)
            if found is None:
                raise _unknown("name", name, self.places, self.table)
            path = found.path
        try:
            number, got = last_turn_page(path, offset)
        except OffsetError as exc:
            raise SubagentError(str(exc).replace("result_offset", "steps_offset")
                                .replace("the result", "the steps")) from None
        return {"name": name, "running": running, "turn": number, "transcript": str(path), "steps_page": got.as_dict()}

    def open(self) -> None:
        """Nothing to take up from a previous daemon: claude's transcripts are the record, read through the index
        (its keeper started with the engine); a turn that was running died with that daemon."""

    def shutdown(self) -> None:
        """Stop every running turn: SIGINT, SIGKILL after `kill_grace`; return once all are recorded (bounded)."""
        turns = self.table.close()
        for turn in turns:
            with self.table.cond:
                # B023: the lambda is waited on here, within this iteration.
                self.table.wait_locked(lambda: turn.state != T.STARTING, STARTING_WAIT_SECONDS)  # noqa: B023
            self.runner.stop(turn, force=False, reason="daemon shutdown")
        with self.table.cond:
            self.table.wait_locked(lambda: not self.table.running_locked(), self.settings.kill_grace)
            stubborn = self.table.running_locked()
        for turn in stubborn:
            self.runner.stop(turn, force=True, reason="daemon shutdown")
        with self.table.cond:
            # Until every todo is queued, not just every turn ended: the caller flushes the todos next.
            self.table.wait_locked(lambda: all(t.reported for t in turns), AFTER_KILL_SECONDS)
            left = [t.name for t in turns if not t.reported]
        if left:
            log.error("shutdown: turns whose end could not be recorded in time: %s", ", ".join(left))
        self.index_keeper.stop()

    def running_view(self, name: str) -> TurnView | None:
        """The view of `name`'s running turn, None when it has none (no disk read)."""
        with self.table.cond:
            turn = self.table.running_locked(name)
            return None if turn is None else views.turn_view(turn, self.settings.result_chars)

    # ------------------------------------------------------------------------------------------ helpers

    def _confirm(self, turn: Turn) -> TurnView:
        """Wait (bounded by confirm_wait) for claude's init line or an early exit; then answer."""
        with self.table.cond:
            self.table.wait_locked(lambda: turn.stream.init_seen or turn.state == T.ENDED, self.settings.confirm_wait)
            return views.turn_view(turn, self.settings.result_chars)

    def _view(self, turn: Turn) -> TurnView:
        with self.table.cond:
            return views.turn_view(turn, self.settings.result_chars)

    def _status_of(self, name: str, result_offset: int | None) -> SessionAnswer:
        view = self.running_view(name)
        if view is not None:
            if result_offset is not None:
                raise SubagentError(f"result_offset: {name!r} is running turn {view['turn']}; its result can be read "
                                    f"once it ends: status(name={name!r}, wait_seconds=30) waits for that")
            return view
        found = self.places.find(name)
        if found is None:
            raise _unknown("name", name, self.places, self.table)
        session = self._transcript_view(found, name, self.sessions.live_sessions(), with_work=True)
        if result_offset is not None:
            session["result_page"] = result_page(self.table, found, result_offset)
        return session

    def _transcript_view(self, t: Transcript, name: str, live: list[LiveSession],
                         with_work: bool = False) -> SessionView:
        """`with_work`: what the last turn did too (ours remembers it; else one read of the transcript)."""
        other = next((s for s in live if s.session_id == t.session_id), None)
        ours = self.table.ended_turn_of(t)
        place = self.places.book.get(name)
        store = self.places.store_for(place)
        work = (turn_work_data(t.path, store.workdir, store.turn_start(t.path))
                if with_work and (ours is None or ours.work is None) else None)
        stat = self.places.worktree_stat(place) if with_work else None  # now: the agent may have merged since
        return views.transcript_view(t, name, self.settings.result_chars, other, ours, work, place, stat)


def turn_tasks(engine: SubagentEngine) -> TurnTasks:
    """The engine's turns as MCP tasks (turns/tasks.py); the runner then holds an end's todo for a polling client."""
    tasks = TurnTasks(engine.table, Path(engine.settings.state_dir), lambda name, turn: end_text(engine, name, turn),
                      lambda turn: engine.runner.stop(turn, force=False, reason="tasks/cancel"),
                      lambda name: engine.runner._safe_todo(lambda: engine.todos.clear(name)))
    engine.runner.hold = tasks.hold_seconds
    return tasks


def end_text(engine: SubagentEngine, name: str, turn: Turn | None) -> str:
    """A completed task's result: the ended turn's own answer when this process ran it (exact: its outcome as the
    stream said it), else what status(name) says from the transcript (after a restart)."""
    if turn is not None:
        return turn_result(engine._view(turn), "ended", engine.notices).text
    try:
        return render_session(engine._status_of(name, None))
    except SubagentError as exc:
        return f"name={name}: {exc}"


def result_page(table: TurnTable, t: Transcript, offset: int) -> PageData:
    """A page of the last turn's whole result, read from claude's transcript (so it survives a restart)."""
    text = t.last_turn.result_text if t.last_turn is not None else ""
    ours = table.ended_turn_of(t)
    if not text and ours is not None and ours.outcome is not None:
        text = ours.outcome.result_text  # a turn whose only text came in the stream (an error's result line)
    try:
        return page(text, offset).as_dict()
    except OffsetError as exc:
        raise SubagentError(str(exc)) from None


def _with(args: dict[str, Any], **first: Any) -> dict[str, Any]:
    """`args` with the positional arguments, where given."""
    return {**{key: value for key, value in first.items() if value is not None}, **args}
