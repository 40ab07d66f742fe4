"""Subagent turns as MCP tasks (common/protocol/mcp_tasks.py): a `start` or `continue` from a client of the
extension answers a task handle once the turn runs; the client polls it (`tasks/get`) and stops it
(`tasks/cancel` = interrupt).

The handle is `<session name>-<128-bit secret>`, kept in the state directory (task-handles.json, 0600, replaced
whole) before the answer is sent, so `tasks/get` resolves at once and after a restart. One handle per name: the
session's latest turn (a name runs one turn at a time). A poll that returns the end counts as delivered: the
turn's todo is then not sent, or cleared if it was (one notice, never two); the runner holds an end's todo up
to two poll intervals for a client that polled the handle lately (`hold_seconds`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from common.disk.safe_files import read_own
from common.disk.whole_files import replace_whole
from common.protocol import mcp_tasks
from common.protocol.mcp_tasks import TaskState, UnknownHandle
from hivesubagent.turns import turn as T
from hivesubagent.turns.table import TurnTable
from hivesubagent.turns.turn import Turn
from hivesubagent.turns.waits import progress_message

log = logging.getLogger(__name__)

FILE_NAME = "task-handles.json"
FORMAT = 1
TTL_MS = 7 * 24 * 3600 * 1000  # a handle lasts until its name's next turn replaces it; a week is what we promise
RECENT_POLLS = 3  # a client that polled within this many poll intervals is waited for at the end


@dataclass(frozen=True)
class HandleRecord:
    """One session's handle: the turn it follows (session id and turn number) and when it was made."""

    handle: str
    session_id: str
    turn: int
    created: float  # epoch seconds
    cancelled: bool = False


class TurnTasks:
    """The daemon's `TaskHandles`: handles made for running turns, and their polls and cancels.

    `answer(name, turn)`: the text of an ended turn (None: one of an earlier process) (the completed task's result);
    `stop(turn)`: interrupt it (SIGINT, SIGKILL after the grace); `clear(name)`: clear its todo."""

    def __init__(self, table: TurnTable, state_dir: Path, answer: Callable[[str, Turn | None], str],
                 stop: Callable[[Turn], None], clear: Callable[[str], None]):
        self.table, self.answer, self.stop, self.clear = table, answer, stop, clear
        self.path = Path(state_dir) / FILE_NAME
        self._lock = threading.Lock()
        self._records = self._load()
        self._polled: dict[str, float] = {}  # name -> monotonic time of the client's last poll (memory only)

    def _load(self) -> dict[str, HandleRecord]:
        try:
            data = json.loads(read_own(str(self.path)))
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, not {FORMAT}")
            return {str(name): HandleRecord(**r) for name, r in data["handles"].items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("task handles %s not read (%s): clients polling older turns get 'unknown task'", self.path,
                        exc)
            return {}

    def _save_locked(self, records: dict[str, HandleRecord]) -> None:
        data = {"format": FORMAT, "handles": {n: asdict(r) for n, r in sorted(records.items())}}
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        replace_whole(str(self.path), json.dumps(data).encode(),
                      str(self.path.with_name(f".{FILE_NAME}.{os.getpid()}.{threading.get_ident()}")))
        self._records = records

    def open_running(self, name: str) -> tuple[str, TaskState] | None:
        """A new handle for `name`'s running turn, on disk before this returns, and the task's state now; None
        when it runs no turn (it ended already)."""
        with self.table.cond:
            turn = self.table.running_locked(name)
            if turn is None:
                return None
            session_id, number = turn.session_id, turn.number
            turn.client_task = True
        record = HandleRecord(mcp_tasks.new_handle(name), session_id, number, time.time())
        with self._lock:
            self._save_locked({**self._records, name: record})
        return record.handle, self._state(record, turn, polled=False)

    def tracked(self) -> set[str]:
        """The names whose latest turn a client follows as a task."""
        with self._lock:
            return set(self._records)

    def _record(self, handle: str) -> HandleRecord:
        name = mcp_tasks.handle_prefix(handle)
        with self._lock:
            record = self._records.get(name or "")
        if record is None or not mcp_tasks.same_handle(record.handle, handle):
            raise UnknownHandle(handle)
        return record

    def _turn(self, record: HandleRecord) -> Turn | None:
        """The engine's turn that the handle follows, running or the last ended one; None: not this process's."""
        name = mcp_tasks.handle_prefix(record.handle) or ""
        with self.table.cond:
            turn = self.table.running_locked(name) or self.table.last_ended_locked(name)
        if turn is None or turn.session_id != record.session_id or turn.number != record.turn:
            return None
        return turn

    def get(self, handle: str) -> TaskState:
        record = self._record(handle)
        return self._state(record, self._turn(record), polled=True)

    def known(self, handle: str) -> bool:
        try:
            self._record(handle)
        except UnknownHandle:
            return False
        return True

    def cancel(self, handle: str) -> None:
        record = self._record(handle)
        turn = self._turn(record)
        with self.table.cond:
            running = turn is not None and turn.state in (T.STARTING, T.RUNNING)
        if turn is None or not running or record.cancelled:
            return
        with self._lock:
            self._save_locked({**self._records, turn.name: HandleRecord(**{**asdict(record), "cancelled": True})})
        with self.table.cond:
            turn.delivered = True  # the client stopped it itself and knows: its end sends no todo
        self.stop(turn)

    def shown(self, names: list[str]) -> None:
        """The model read the ended turns of `names` in an answer (status, interrupt): a client following one as a
        task then gets a one-line result, not the whole end again, and no todo is sent for it."""
        with self.table.cond:
            for name in names:
                turn = self.table.last_ended_locked(name)
                if turn is not None and turn.client_task:
                    turn.end_shown = turn.delivered = True
            self.table.changed_locked()

    def hold_seconds(self, turn: Turn) -> float:
        """How long the end's todo waits for a poll: two poll intervals when a client polled this turn's handle
        within the last few intervals, else 0 (no client follows it, or it went away)."""
        with self._lock:
            record, polled = self._records.get(turn.name), self._polled.get(turn.name)
        if record is None or polled is None or (record.session_id, record.turn) != (turn.session_id, turn.number):
            return 0.0
        interval = mcp_tasks.poll_interval_ms(time.time() - record.created) / 1000
        return 2 * interval if time.monotonic() - polled <= RECENT_POLLS * interval else 0.0

    def _state(self, record: HandleRecord, turn: Turn | None, polled: bool) -> TaskState:
        now = time.time()
        interval = mcp_tasks.poll_interval_ms(now - record.created)
        name = mcp_tasks.handle_prefix(record.handle) or ""
        todo_sent = turn is None  # a turn of an earlier process: its todo, if any, went out then
        with self.table.cond:
            ended = turn is None or (turn.state == T.ENDED and turn.outcome is not None)
            if not ended:
                assert turn is not None
                message = progress_message([turn], turn.elapsed()).replace("waited", "running", 1)
            elif polled and turn is not None:
                turn.delivered = True  # the runner sends no todo for it unless it has begun to
                self.table.changed_locked()
                todo_sent = turn.todo_sent
                if todo_sent:  # its upsert is on its way: the clear must come after it
                    self.table.wait_locked(lambda: turn.reported, 5.0)
        if polled:
            with self._lock:
                self._polled[name] = time.monotonic()
        if not ended:
            return TaskState("working", record.created, now, TTL_MS, interval, message)
        if polled and todo_sent:
            self.clear(name)  # this poll is the one notice the model gets
        text = self.answer(name, turn)
        if turn is not None and turn.end_shown:
            text = (f"{text.splitlines()[0] if text else 'name=' + name} (you were shown this end already; "
                    f'status(name="{name}") shows it again)')
        first = text.splitlines()[0] if text else ""
        if record.cancelled:
            return TaskState("cancelled", record.created, now, TTL_MS, interval,
                             f"stopped by tasks/cancel (SIGINT, SIGKILL after the grace): {first[:200]}")
        return TaskState("completed", record.created, now, TTL_MS, interval, first[:200] or None,
                         result=mcp_tasks.call_tool_result(text))
