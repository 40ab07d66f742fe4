"""Task records and output files on disk: `<state>/bash-tasks/<id>.{out,err,json}`.

- Directories are 0700 and files 0600: task output can hold secrets.
- A record is replaced atomically at every change of state: written to a temp file, renamed over the old
  one. A crash leaves either the old record or the new one, never a torn one. When it reaches the disk (at
  once, or in the next group flush a few ms later) is the `Flusher`'s business (common/durability.py).
- Every write of one task id goes through `RecordWriter`, which orders them (see there for who writes
  which record when, and what a crash at each point leaves on disk).
- Output files are written by the task's own processes (the daemon only opens them), so nothing is lost
  when the daemon dies, and reading a tail seeks from the end: its cost does not depend on the file's size.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.durability import ALWAYS, FLUSHED, Flusher
from common.names import check_name
from common.safe_files import NOFOLLOW, NotOurFile, check_own, create_fresh, open_own, read_own
from common.state_dir import SHARED_DIR_MODE
from common.terminal_text import readable

from .task import Task

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
        return {"path": self.path, "tail": self.text, "size": self.size, "shown_bytes": self.shown, "elided_bytes": self.elided}


def _utf8_start(data: bytes) -> int:
    """Index of the first byte that can start a character: skip at most 3 continuation bytes (10xxxxxx)."""
    i = 0
    while i < min(3, len(data)) and (data[i] & 0xC0) == 0x80:
        i += 1
    return i


def read_tail(path: Path, limit: int) -> Tail:
    """The last `limit` bytes of `path` (fewer when cut at a character boundary). A missing file is empty.

    Plain descriptor calls: Python's buffered `open()` adds an ioctl, two lseeks and an fstat to every read,
    and each syscall of a request thread waits for the GIL again under load."""
    try:
        # No link followed, no FIFO waited on: a planted file must not put its text in front of the model.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | NOFOLLOW)
    except FileNotFoundError:
        return Tail(str(path), "", 0, 0, 0)
    except OSError as exc:
        return Tail(str(path), f"[not shown: {path} cannot be read: {exc.strerror}]", 0, 0, 0)
    try:
        size = check_own(fd, str(path)).st_size
        start = max(0, size - limit)
        data = os.pread(fd, limit, start) if size else b""
    except NotOurFile as exc:
        return Tail(str(path), f"[not shown: {path} {exc.strerror}]", 0, 0, 0)
    finally:
        os.close(fd)
    size = max(size, start + len(data))  # the file may have grown between fstat and read
    if start > 0:
        data = data[_utf8_start(data):]
    return Tail(str(path), readable(data), size, len(data), size - len(data))


def _unlink_missing_ok(path: str) -> None:
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
        """`shared`: the state directory's group may read (common/state_dir.py, --share-group): records and
        outputs 0640, the directory 2750 (it inherits the group from the setgid state directory)."""
        self.state_dir = Path(state_dir).absolute()
        self.dir = self.state_dir / "bash-tasks"
        self._dir = str(self.dir)
        self.file_mode = SHARED_FILE_MODE if shared else FILE_MODE
        dir_mode = SHARED_DIR_MODE if shared else DIR_MODE
        for d in (self.state_dir, self.dir):
            d.mkdir(mode=dir_mode, parents=True, exist_ok=True)
        os.chmod(self.dir, dir_mode)
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

    def make_spare(self, task_id: str) -> tuple[int, int, int, int]:
        """A spare's files (spares.py): fresh output files, as `prepare` makes them for a fresh id, and two
        temp files, for its pending record and for the record after it; all open. Raises FileExistsError if
        the id has files already."""
        check_name(task_id, "id")
        out, err = self._create_outputs(f"{self.dir}/{task_id}")
        made = [out, err]
        try:
            for path in self.temp_paths(task_id):
                made.append(create_fresh(path, os.O_WRONLY, self.file_mode))
        except BaseException:
            self.discard_spare(task_id, made)
            raise
        return made[0], made[1], made[2], made[3]

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
            _unlink_missing_ok(path)

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

    def save_dict(self, task_id: str, record: dict, made: tuple[int, str] | None = None) -> None:
        """Replace the record of `task_id` with `record` (a snapshot taken under the engine's lock: store.record_of).
        `made`: an empty temp file made beforehand (a spare's) and its path; it is consumed either way."""
        check_name(task_id, "id")
        final = f"{self.dir}/{task_id}.json"  # plain strings: Path arithmetic is a visible share of a write
        tmp_fd, tmp = made if made is not None else (None, self.temp_paths(task_id)[0])
        try:
            payload = json.dumps({"version": RECORD_VERSION, **record}, separators=(",", ":")).encode()
        except BaseException:
            if tmp_fd is not None:
                os.close(tmp_fd)
            raise
        fd = create_fresh(tmp, os.O_WRONLY, self.file_mode) if tmp_fd is None else tmp_fd
        previous = self._written.get(task_id)  # None: this is the id's first record
        held = None
        try:
            os.write(fd, payload)
            self.flusher.before_rename(fd)
            held = self._hold_if_owning_blocks(previous, final)
            os.replace(tmp, final)
        except BaseException:
            os.close(fd)
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
        flusher's thread frees them rather than the rename on the caller's path (common/durability.py: ~1-2
        ms on a disk mounted with `discard`). The first record of a task, replaced before its flush, has none:
        no extra syscall on the path of a quick task."""
        if ticket is None or not self.flusher.reached_disk(ticket):
            return None
        return _hold(path)

    def _unlink_off_path(self, path: str) -> None:
        """Unlink `path`, leaving the freeing of its blocks to the flusher's thread (see save_dict)."""
        held = _hold(path)
        try:
            _unlink_missing_ok(path)
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
                _unlink_missing_ok(p)

    def delete(self, task_id: str) -> None:
        """Remove a task's record and output files (retention)."""
        self._written.pop(task_id, None)
        for kind in ("json", "out", "err"):
            self.path(task_id, kind).unlink(missing_ok=True)

    def tail(self, task_id: str, kind: str, limit: int) -> Tail:
        return read_tail(self.path(task_id, kind), limit)

    def empty_tail(self, task_id: str, kind: str) -> Tail:
        """The tail of an output file known to be empty (a task not started yet), without reading it."""
        return Tail(self.file(task_id, kind), "", 0, 0, 0)


_TASK_FIELDS = tuple(f.name for f in dataclasses.fields(Task) if f.name != "started_mono")


def record_of(task: Task) -> dict[str, Any]:
    """A task as its record: every field but `started_mono`, the result and rusage as plain dicts. Built by
    hand rather than with `dataclasses.asdict` (a recursive deep copy): it runs at every change of state, under
    the engine's lock."""
    data = {name: getattr(task, name) for name in _TASK_FIELDS}
    result = task.result
    if result is not None:
        data["result"] = res = dict(vars(result))
        if result.rusage is not None:
            res["rusage"] = dict(vars(result.rusage))
    return data


class RecordWriter:
    """Orders every record write of a task id: one write at a time per id, and only for the task that owns it.

    Who writes which record, and when:
    - `pending`: `run`, before the task is queued: it must be on disk before the process exists, because it
      holds the marker a restart needs to find the task's leftover processes, and a task the caller was told
      about must survive a crash (as `interrupted`).
    - `running`: the task's worker, once the task has run for runner.RUNNING_RECORD_DELAY; a task that ends
      sooner goes from its pending record to its terminal one.
    - terminal (`done`, `timed_out`, `killed`, `interrupted`): the thread that ended the task, before any
      inline wait answers with it.

    What a crash (the daemon killed; the machine stays up) leaves, at each point of a task's life:
    - before the pending record's rename: no record (the caller got an error or no answer; no process ran),
      at most a `.<id>.json.tmp`, removed at the next start, and empty output files;
    - from then until the running record's rename (the process may already run): the pending record; the
      next start finds the task's processes by the record's marker, stops them and records `interrupted`,
      saying the task was running when it found any (Engine.start);
    - until the terminal record's rename: the running record -> `interrupted` at the next start;
    - after it: the terminal record, which is what every inline answer said.
    A power cut leaves, per task, one of these records as it last reached the disk (`--fsync always`: the
    last one written; `batched`: possibly one written up to a flush window earlier); the task's processes died
    with the machine.

    Ownership: a record is written only for the task that currently owns its id (`own`). A reused name or a
    pruned task changes the owner, which waits for a write of the id in progress, so a late write of a
    finished task can never replace the record of the new task with its name, nor bring a pruned record back
    (two writers of one id would also share its temp file, and one rename would fail).
    """

    def __init__(self, store: TaskStore):
        self.store = store
        self._writes_changed = threading.Condition(threading.Lock())  # guards _owner and _busy
        self._owner: dict[str, object] = {}
        self._busy: set[str] = set()  # ids whose record is being written or deleted right now
        self._made: dict[str, tuple[int, str]] = {}  # id -> temp file made ahead for its next record

    def own(self, task_id: str, owner: object | None) -> None:
        """Only `owner`'s records are written as `task_id` from now on (None: nobody's)."""
        with self._writes_changed:
            if owner is None:
                self._owner.pop(task_id, None)
            else:
                self._owner[task_id] = owner
            while task_id in self._busy:
                self._writes_changed.wait()
            made = self._made.pop(task_id, None)
        if made is not None:  # made for the previous owner's next record, which never came
            os.close(made[0])
            _unlink_missing_ok(made[1])

    def made_next(self, task_id: str, made: tuple[int, str]) -> None:
        """An empty temp file (fd, path) for the next record of `task_id`, made ahead (spares.py)."""
        with self._writes_changed:
            old, self._made[task_id] = self._made.get(task_id), made
        if old is not None:
            os.close(old[0])

    def release(self, task_id: str, owner: object, delete) -> bool:
        """Retention: if `owner` still owns `task_id`, disown it and call `delete(task_id)` while no record of
        the id can be written (a `run` reusing the name waits in `own`). False if the name was taken again."""
        with self._writes_changed:
            if self._owner.get(task_id) is not owner:
                return False
            del self._owner[task_id]
            self._claim(task_id)
        try:
            delete(task_id)
        finally:
            self._done(task_id)
        return True

    def save_now(self, task_id: str, owner: object, record: dict, made: tuple[int, str] | None = None) -> None:
        """Write `record` (temp, rename) unless `owner` no longer owns the id. Raises OSError. `made`: a temp
        file made beforehand (TaskStore.save_dict), consumed either way; else the one `made_next` left, if any."""
        with self._writes_changed:
            while task_id in self._busy:
                self._writes_changed.wait()
            if made is None:
                made = self._made.pop(task_id, None)
            if self._owner.get(task_id) is not owner:
                if made is not None:  # (its name is left for the next create_fresh of that path)
                    os.close(made[0])
                return
            self._claim(task_id)
        try:
            self.store.save_dict(task_id, record, made)
        finally:
            self._done(task_id)

    def _claim(self, task_id: str) -> None:
        while task_id in self._busy:
            self._writes_changed.wait()
        self._busy.add(task_id)

    def _done(self, task_id: str) -> None:
        with self._writes_changed:
            self._busy.discard(task_id)
            self._writes_changed.notify_all()
