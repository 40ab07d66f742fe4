"""Task records and output files on disk: `<state>/bash-tasks/<id>.{out,err,json}`.

- Directories are 0700 and files 0600: task output can hold secrets.
- A record is replaced atomically at every change of state: written whole to a temp file
  (common/disk/whole_files.py), renamed over the old one. A crash leaves either the old record or the new one,
  never a torn one. When it reaches the disk (at once, or in the next group flush a few ms later) is the
  `Flusher`'s business (common/disk/durability.py).
- A task's end can be recorded on a full disk: when its pending record is written, the temp file of its
  terminal record gets the disk blocks it will need, reserved ahead (`save_pending`; a spare's is reserved
  when the spare is made). A `run` whose record or end does not fit is refused whole.
- A `bash-tasks/` removed under the daemon is made again (`repair`), checked as at start.
- Every write of one task id goes through `records.RecordWriter`, which orders them (see there for who
  writes which record when, and what a crash at each point leaves on disk).
- Output files are written by the task's own processes (the daemon only opens them), so nothing is lost
  when the daemon dies, and reading a tail seeks from the end: its cost does not depend on the file's size.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from common.disk.durability import ALWAYS, FLUSHED, Flusher
from common.disk.safe_files import NOFOLLOW, create_fresh, open_own, read_own
from common.disk.state_dir import SHARED_DIR_MODE, remake_dir
from common.disk.whole_files import discard_temp, write_all
from common.json_text import compact
from common.names import check_name
from hivebash.disk.end_room import SPARE_END_ROOM, EndRoom, Temp, end_need
from hivebash.tasks.task import Task

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
SHARED_FILE_MODE = 0o640
RECORD_VERSION = 1
_TMP_SUFFIX = ".tmp"
@dataclass(frozen=True)
class Tail:
    """The end of one output file, decoded for reading."""

    path: str
    text: str
    size: int  # bytes in the file
    shown: int  # bytes of the file behind `text`
    elided: int  # bytes before them that are not shown (size - shown)

    def to_dict(self) -> dict:
        return {"path": self.path, "tail": self.text, "size": self.size, "shown_bytes": self.shown,
                "elided_bytes": self.elided}


def unlink_missing_ok(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _hold(path: str) -> int | None:
    """A reference (O_PATH, the link itself if it is one) that keeps the file at `path` from being freed when
    its name goes, or None if there is nothing to hold (gone: a concurrent delete of a record is excluded by
    RecordWriter; an operator may have removed it)."""
    try:
        return os.open(path, os.O_PATH | NOFOLLOW)
    except OSError:
        return None


def _open_append(path: str, mode: int) -> int:
    flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
    try:
        return open_own(path, flags)
    except FileNotFoundError:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL | NOFOLLOW, mode)


class TaskStore:
    """The `bash-tasks` directory: one record and two output files per task id."""

    def __init__(self, state_dir: Path, fsync: str = ALWAYS, fsync_window: float = 0.0, shared: bool = False):
        """`shared`: the state directory's group may read (common/disk/state_dir.py, --share-group): records and
        outputs 0640, the directory 2750 (it inherits the group from the setgid state directory)."""
        self.state_dir = Path(state_dir).absolute()
        self.dir = self.state_dir / "bash-tasks"
        self._dir = str(self.dir)
        self.file_mode = SHARED_FILE_MODE if shared else FILE_MODE
        self.dir_mode = dir_mode = SHARED_DIR_MODE if shared else DIR_MODE
        for d in (self.state_dir, self.dir):
            d.mkdir(mode=dir_mode, parents=True, exist_ok=True)
        os.chmod(self.dir, dir_mode)
        self.room = EndRoom(self._dir)  # for each task's end (end_room.py)
        self.flusher = Flusher(self.dir, fsync, fsync_window)
        # Per id whose record exists: the flusher's ticket of its last write, or FLUSHED when its blocks are
        # allocated anyway (loaded at start, or renamed over an older record). See _hold_if_owning_blocks.
        self._written: dict[str, int] = {}

    def path(self, task_id: str, kind: str) -> Path:
        """`kind` is out, err or json. The id is checked against the name rule before it touches a path."""
        return Path(self.file(task_id, kind))

    def file(self, task_id: str, kind: str) -> str:
        """`path` as a plain string, for the paths of every answer: building a Path (parse, then format) was a
        fifth of what showing a task cost."""
        check_name(task_id, "id")
        return f"{self._dir}/{task_id}.{kind}"

    def prepare(self, task_id: str) -> tuple[int, int]:
        """Make fresh, empty output files for a new task, replacing a finished task's files of that name;
        return them open for appending (stdout, stderr), as `open_outputs` would: the caller closes them.

        Unlink first, then create: a leftover process of the old task keeps writing into the old (now
        nameless) file instead of into the new task's output. A fresh id has no files, so the exclusive
        create is tried first and the unlinks happen only when a file is there: every unlink (even of a
        missing name) and every create takes the directory's lock: under load, queueing for that lock behind
        the other tasks' files is most of what `prepare` costs (docs/performance.md, "Measurements behind the
        code").
        """
        check_name(task_id, "id")
        base = f"{self.dir}/{task_id}"
        try:
            return self._create_outputs(base)
        except FileExistsError:  # a reused name (or files whose record was unreadable): replace them all
            self._written.pop(task_id, None)
            for old in ("out", "err", "json"):
                self._unlink_off_path(f"{base}.{old}")
            return self._create_outputs(base)

    def _create_outputs(self, base: str) -> tuple[int, int]:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | NOFOLLOW
        out = os.open(f"{base}.out", flags, self.file_mode)
        try:
            return out, os.open(f"{base}.err", flags, self.file_mode)
        except BaseException:
            os.close(out)
            raise

    def make_spare(self, task_id: str) -> tuple[int, int, Temp, Temp]:
        """A spare's files (spares.py): fresh output files, as `prepare` makes them for a fresh id, and two
        temp files, for its pending record and for its end (with SPARE_END_ROOM reserved); all open. Raises
        FileExistsError if the id has files already, ENOSPC when the end's room cannot be had."""
        check_name(task_id, "id")
        out, err = self._create_outputs(f"{self.dir}/{task_id}")
        made = [out, err]
        try:
            paths = self.temp_paths(task_id)
            for path in paths:
                made.append(create_fresh(path, os.O_WRONLY, self.file_mode))
            end = self.room.ensure(Temp(made[3], paths[1]), SPARE_END_ROOM)
        except BaseException:
            self.discard_spare(task_id, made)
            raise
        return made[0], made[1], Temp(made[2], paths[0]), end

    def temp_paths(self, task_id: str) -> tuple[str, str]:
        """Where a record is written before its rename: the usual temp file, and the one made ahead for the
        record after the pending one (both removed at start if a crash left them)."""
        return f"{self.dir}/.{task_id}.json{_TMP_SUFFIX}", f"{self.dir}/.{task_id}.next.json{_TMP_SUFFIX}"

    def discard_spare(self, task_id: str, fds) -> None:
        """Close a spare's files and remove them."""
        for fd in fds:
            os.close(fd)
        base = f"{self.dir}/{task_id}"
        for path in (f"{base}.out", f"{base}.err", *self.temp_paths(task_id)):
            unlink_missing_ok(path)

    def open_outputs(self, task_id: str) -> tuple[int, int]:
        """File descriptors for the task's stdout and stderr (append: both may be shared with its children).
        Opened without O_CREAT, which would take the directory's lock (see prepare); a file deleted since
        prepare is created again."""
        check_name(task_id, "id")
        base = f"{self.dir}/{task_id}"
        out = _open_append(f"{base}.out", self.file_mode)
        try:
            err = _open_append(f"{base}.err", self.file_mode)
        except BaseException:
            os.close(out)
            raise
        return out, err

    def save_dict(self, task_id: str, record: dict, made: Temp | None = None) -> None:
        """Replace the record of `task_id` with `record` (a snapshot taken under the engine's lock: store.record_of),
        whole or not at all. `made`: an empty temp file made beforehand (a spare's); consumed either way."""
        check_name(task_id, "id")
        try:
            payload = compact({"version": RECORD_VERSION, **record}).encode()
        except BaseException:
            if made is not None:
                os.close(made.fd)
            raise
        self._write(task_id, payload, made)

    def save_pending(self, task_id: str, record: dict, made: Temp | None, end: Temp | None) -> Temp:
        """The pending record, after room for the task's end is reserved in `end` (made here when None):
        returns it, for the terminal record. Either both are had or neither (ENOSPC: nothing is renamed);
        `made` and `end` are consumed either way."""
        check_name(task_id, "id")
        try:
            payload = compact({"version": RECORD_VERSION, **record}).encode()
            if end is None:
                path = self.temp_paths(task_id)[1]
                end = Temp(create_fresh(path, os.O_WRONLY, self.file_mode), path)
            end = self.room.ensure(end, end_need(len(payload)))
        except BaseException:
            for temp in (made, end):
                if temp is not None:
                    os.close(temp.fd)
                    discard_temp(temp.path)
            raise
        try:
            self._write(task_id, payload, made)
        except BaseException:
            os.close(end.fd)
            discard_temp(end.path)
            raise
        return end

    def _write(self, task_id: str, payload: bytes, made: Temp | None) -> None:
        final = f"{self.dir}/{task_id}.json"  # plain strings: Path arithmetic is a visible share of a write
        tmp = made.path if made is not None else self.temp_paths(task_id)[0]
        fd = create_fresh(tmp, os.O_WRONLY, self.file_mode) if made is None else made.fd
        previous = self._written.get(task_id)  # None: this is the id's first record
        held = None
        try:
            write_all(fd, payload)  # a short write on a nearly full disk: ENOSPC, and nothing is renamed
            self.flusher.before_rename(fd)
            held = self._hold_if_owning_blocks(previous, final)
            os.replace(tmp, final)
        except BaseException:
            os.close(fd)
            discard_temp(tmp)  # its blocks go back to a disk that may be full
            if held is not None:
                os.close(held)
            raise
        ticket = self.flusher.release(fd, final)
        # ext4's auto_da_alloc allocates the blocks of a file renamed over another at the rename.
        self._written[task_id] = ticket if previous is None else FLUSHED
        if held is not None:
            self.flusher.close_later(held)

    def _hold_if_owning_blocks(self, ticket: int | None, path: str) -> int | None:
        """A reference to the record about to be replaced, when its disk blocks may be allocated, so that the
        flusher's thread frees them rather than the rename on the caller's path (common/disk/durability.py: ~1-2
        ms on a disk mounted with `discard`). The first record of a task, replaced before its flush, has none:
        no extra syscall on the path of a quick task."""
        if ticket is None or not self.flusher.reached_disk(ticket):
            return None
        return _hold(path)

    def repair(self) -> bool:
        """Make the state directory and bash-tasks/ again if they were removed while the daemon ran (modes and
        checks as at start; something else found there raises OSError); True when one was made, and the
        log says so once. What was in them is gone: the engine writes its tasks' records again."""
        made = False
        for d in (self.state_dir, self.dir):
            made = remake_dir(d, self.dir_mode) or made
        if made:
            log.warning("%s was removed while the daemon ran: made again; the output files that were in it are "
                        "lost, the records of the tasks in memory are written again", self.dir)
            self._written.clear()
            self.flusher.directory_replaced()
        return made

    def _unlink_off_path(self, path: str) -> None:
        """Unlink `path`, leaving the freeing of its blocks to the flusher's thread (see save_dict)."""
        held = _hold(path)
        try:
            unlink_missing_ok(path)
        finally:
            if held is not None:
                self.flusher.close_later(held)

    def load_all(self) -> list[Task]:
        """Every readable record, in submission order. Torn temp files are removed; a record that cannot be
        read is logged and left in place for the operator (never deleted: its output may matter)."""
        tasks = []
        names = set(os.listdir(self.dir))
        self._remove_spares_left(names)
        for name in names:
            entry = self.dir / name
            if name.startswith(".") and name.endswith(_TMP_SUFFIX):
                entry.unlink(missing_ok=True)
                continue
            if not name.endswith(".json"):
                continue
            try:
                data = json.loads(read_own(str(entry)))
                task = Task.from_dict(data)
                check_name(task.id, "id")
                if task.id != name[: -len(".json")]:
                    raise ValueError(f"id {task.id!r} does not match the file name")
            except (OSError, ValueError, TypeError) as exc:
                log.warning("skipping unreadable task record %s: %s", entry, exc)
                continue
            tasks.append(task)
            self._written[task.id] = FLUSHED
        tasks.sort(key=lambda t: (t.seq, t.submitted_at))
        return tasks

    def _remove_spares_left(self, names: set[str]) -> None:
        """Output files with no record at all, both empty: a previous daemon's spares (spares.py), or the files
        of a run that died before its pending record (whose caller got no id). Nothing of a task is lost."""
        for name in names:
            task_id, _, kind = name.rpartition(".")
            if kind != "out" or f"{task_id}.json" in names or f"{task_id}.err" not in names:
                continue
            paths = [f"{self.dir}/{task_id}.out", f"{self.dir}/{task_id}.err"]
            try:
                if any(os.stat(p, follow_symlinks=False).st_size for p in paths):
                    continue
            except OSError:
                continue
            for p in paths:
                unlink_missing_ok(p)

    def delete(self, task_id: str) -> None:
        """Remove a task's record and output files (retention)."""
        self._written.pop(task_id, None)
        for kind in ("json", "out", "err"):
            self.path(task_id, kind).unlink(missing_ok=True)

    def empty_tail(self, task_id: str, kind: str) -> Tail:
        """The tail of an output file known to be empty (a task not started yet), without reading it."""
        return Tail(self.file(task_id, kind), "", 0, 0, 0)
