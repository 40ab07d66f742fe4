"""The transcript index kept across daemon restarts, so the first call after a start reads only what claude
appended while the daemon was down and each named transcript's last turn, not every named transcript again.

`IndexKeeper` loads the index from the state directory when the daemon starts, brings it up to date in a
background thread, for up to READY_WAIT_SECONDS before the daemon says it is ready (the first start on a
folder pays for reading its named transcripts there, not in a caller's request), saves it when it changed
(at most every SAVE_SECONDS) and once more when the daemon stops.
The file holds no text of any session, only what makes a restart cheap: per transcript its mark (identity,
offset, fingerprint) and name, and for a named one its summary as it stood before its last turn's prompt
(turns, model, cumulative cost, times) with the offset where that prompt's line starts. The last turn (its
prompt, outcome and result text) is read again from claude's transcript on the first look after a restart:
claude's record stays the only copy of what a subagent said, and a restart reads one turn per named
transcript, not all of it.
A saved entry is only a starting point: it is checked like any other (identity, offset, fingerprint) before
it is used, so a stale or foreign file costs a fresh read, never a wrong answer. A file that cannot be read
back (corrupt, another format, not ours) is ignored with a warning: the index is rebuilt.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import stat
import threading
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.disk.whole_files import replace_whole
from common.json_text import compact
from hivesubagent.transcripts.index import TranscriptIndex, _Entry, _Mark
from hivesubagent.transcripts.transcript import TranscriptReader

if TYPE_CHECKING:
    from hivesubagent.transcripts.sessions import SessionStore

log = logging.getLogger(__name__)

FORMAT = 2  # a file of another format is ignored: the index is rebuilt
FILE_NAME = "transcript-index.json"
SAVE_SECONDS = 10.0
STOP_WAIT_SECONDS = 1.0
# How long a starting daemon waits for the warm-up before it says it is ready: a restart's warm-up is a stat
# per file and a read of each named transcript's last turn, and ends at once; a first start on a large folder
# goes on in the background past this.
READY_WAIT_SECONDS = 2.0
_SUMMARY_FIELDS = ("session_id", "name", "archived", "turns", "model", "cost_usd", "first_at", "last_at")


def _entry_data(entry: _Entry) -> dict[str, Any]:
    mark = asdict(entry.mark)
    mark["fingerprint"] = base64.b64encode(entry.mark.fingerprint).decode()
    return {"mark": mark, "name": entry.name, "reader": _before_last_turn(entry)}


def _before_last_turn(entry: _Entry) -> dict[str, Any] | None:
    """The summary as it stood before the last turn's prompt, and where that prompt starts (no text of it)."""
    if entry.before_turn is not None:  # loaded and not looked at since: saved as it was loaded
        return _summary(entry.before_turn, entry.turn_start)
    reader = entry.reader
    if reader is None or (reader.turn is not None and entry.turn_start is None):
        return None  # nothing to save, or no offset to read the turn again from: the next run reads it whole
    summary = _summary(reader, None if reader.turn is None else entry.turn_start)
    if reader.turn is not None:
        summary["summary"].update(turns=reader.t.turns - 1, cost_usd=reader.turn.cost_before_usd)
    return summary


def _summary(reader: TranscriptReader, turn_start: int | None) -> dict[str, Any]:
    return {"summary": {k: getattr(reader.t, k) for k in _SUMMARY_FIELDS}, "turn_start": turn_start}


def _entry_from(path: Path, data: dict[str, Any]) -> _Entry:
    mark = dict(data["mark"])
    mark["fingerprint"] = base64.b64decode(mark["fingerprint"])
    entry = _Entry(_Mark(**mark), data["name"])
    if data["reader"] is not None:
        reader = TranscriptReader(path)
        for key, value in data["reader"]["summary"].items():
            if key in _SUMMARY_FIELDS:
                setattr(reader.t, key, value)
        turn_start = data["reader"]["turn_start"]
        if turn_start is None:
            entry.reader = reader  # no turn yet: the summary is whole
        elif isinstance(turn_start, int) and 0 <= turn_start < entry.mark.offset:
            entry.before_turn, entry.turn_start = reader, turn_start
        else:
            raise ValueError(f"{path}: turn_start {turn_start!r} is not an offset before {entry.mark.offset}")
    return entry


def save(index: TranscriptIndex, path: Path) -> None:
    """Write the index whole to a new file beside `path`, then rename it over `path` (0600, no links)."""
    data = {"format": FORMAT, "entries": index.export(_entry_data)}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    replace_whole(str(path), compact(data).encode(), str(tmp))


def load(path: Path) -> dict[str, _Entry]:
    """The entries saved at `path`; none when there is no such file or it cannot be trusted or read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        log.warning("transcript index %s not loaded (%s): rebuilding it", path, exc.strerror or exc)
        return {}
    try:
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                raise ValueError("not a regular file of this user")
            data = json.loads(f.read())
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, not {FORMAT}")
        return {p: _entry_from(Path(p), e) for p, e in data["entries"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        log.warning("transcript index %s not loaded (%s): rebuilding it", path, exc)
        return {}


class IndexKeeper:
    """Load at start, warm up and save in the background, save at stop (see the module docstring)."""

    def __init__(self, store: SessionStore, state_dir: Path):
        self.store = store
        self.path = state_dir / FILE_NAME
        self._stop = threading.Event()
        self._warm = threading.Event()
        self._saved = -1
        self._thread = threading.Thread(target=self._run, name="subagent-transcript-index", daemon=True)

    def start(self, wait: float = READY_WAIT_SECONDS) -> bool:
        """Load, warm up in the background; wait up to `wait` seconds for the warm-up (True: it ended)."""
        self.store.index.adopt(load(self.path))
        self._thread.start()
        return self._warm.wait(wait)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(STOP_WAIT_SECONDS)  # a warm-up still running is left; what it read so far is saved
        self._save()

    def _run(self) -> None:
        try:
            self.store.list()  # the warm-up: every name, and the summary of every named transcript
        except Exception:  # the index is a cache: a failure here only means requests read for themselves
            log.exception("transcript index warm-up failed")
        self._warm.set()
        while not self._stop.wait(SAVE_SECONDS):
            self._save()

    def _save(self) -> None:
        version = self.store.index.version
        if version == self._saved:
            return
        try:
            save(self.store.index, self.path)
            self._saved = version
        except OSError as exc:
            log.warning("transcript index not saved to %s: %s", self.path, exc.strerror or exc)
