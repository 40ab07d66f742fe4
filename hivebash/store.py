"""Task records and output files on disk: `<state>/bash-tasks/<id>.{out,err,json}`.

- Directories are 0700 and files 0600: task output can hold secrets.
- A record is replaced atomically at every change of state: written to a temp file, fsync'ed, renamed over
  the old one. A crash leaves either the old record or the new one, never a torn one. (The directory itself
  is not fsync'ed: after a power cut the worst case is the previous, still consistent, record.)
- Output files are written by the task's own processes (the daemon only opens them), so nothing is lost
  when the daemon dies, and reading a tail seeks from the end: its cost does not depend on the file's size.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from common.names import check_name

from .task import Task

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
RECORD_VERSION = 1
_TMP_SUFFIX = ".tmp"
# C0 control characters other than tab, newline and carriage return; shown as \xNN so binary output can
# neither break a terminal nor hide text from the model.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


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


def decode_safely(data: bytes) -> str:
    """UTF-8 where it is valid, `\\xNN` for every byte that is not and for control characters."""
    text = data.decode("utf-8", errors="backslashreplace")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _utf8_start(data: bytes) -> int:
    """Index of the first byte that can start a character: skip at most 3 continuation bytes (10xxxxxx)."""
    i = 0
    while i < min(3, len(data)) and (data[i] & 0xC0) == 0x80:
        i += 1
    return i


def read_tail(path: Path, limit: int) -> Tail:
    """The last `limit` bytes of `path` (fewer when cut at a character boundary). A missing file is empty."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = max(0, size - limit)
            f.seek(start)
            data = f.read(limit)
    except FileNotFoundError:
        return Tail(str(path), "", 0, 0, 0)
    size = max(size, start + len(data))  # the file may have grown between fstat and read
    if start > 0:
        data = data[_utf8_start(data):]
    return Tail(str(path), decode_safely(data), size, len(data), size - len(data))


class TaskStore:
    """The `bash-tasks` directory: one record and two output files per task id."""

    def __init__(self, state_dir: Path):
        self.state_dir = Path(state_dir).absolute()
        self.dir = self.state_dir / "bash-tasks"
        for d in (self.state_dir, self.dir):
            d.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        os.chmod(self.dir, DIR_MODE)

    def path(self, task_id: str, kind: str) -> Path:
        """`kind` is out, err or json. The id is checked against the name rule before it touches a path."""
        check_name(task_id, "id")
        return self.dir / f"{task_id}.{kind}"

    def prepare(self, task_id: str) -> None:
        """Make fresh, empty output files for a new task, replacing a finished task's files of that name.

        Unlink first, then create: a leftover process of the old task keeps writing into the old (now
        nameless) file instead of into the new task's output.
        """
        for kind in ("out", "err", "json"):
            self.path(task_id, kind).unlink(missing_ok=True)
        for kind in ("out", "err"):
            fd = os.open(self.path(task_id, kind), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
            os.close(fd)

    def open_outputs(self, task_id: str) -> tuple[int, int]:
        """File descriptors for the task's stdout and stderr (append: both may be shared with its children)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        out = os.open(self.path(task_id, "out"), flags, FILE_MODE)
        try:
            err = os.open(self.path(task_id, "err"), flags, FILE_MODE)
        except BaseException:
            os.close(out)
            raise
        return out, err

    def save(self, task: Task) -> None:
        """Replace the task's record atomically: temp file, fsync, rename."""
        self.save_dict(task.id, task.to_dict())

    def save_dict(self, task_id: str, record: dict) -> None:
        """`save` for a snapshot taken under the engine's lock (the write itself happens outside it)."""
        final = self.path(task_id, "json")
        tmp = final.with_name(f".{final.name}{_TMP_SUFFIX}")
        payload = json.dumps({"version": RECORD_VERSION, **record}, separators=(",", ":")).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
        try:
            os.write(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)

    def load_all(self) -> list[Task]:
        """Every readable record, in submission order. Torn temp files are removed; a record that cannot be
        read is logged and left in place for the operator (never deleted: its output may matter)."""
        tasks = []
        for entry in self.dir.iterdir():
            name = entry.name
            if name.startswith(".") and name.endswith(_TMP_SUFFIX):
                entry.unlink(missing_ok=True)
                continue
            if not name.endswith(".json"):
                continue
            try:
                data = json.loads(entry.read_bytes())
                task = Task.from_dict(data)
                check_name(task.id, "id")
                if task.id != name[: -len(".json")]:
                    raise ValueError(f"id {task.id!r} does not match the file name")
            except (OSError, ValueError, TypeError) as exc:
                log.warning("skipping unreadable task record %s: %s", entry, exc)
                continue
            tasks.append(task)
        tasks.sort(key=lambda t: (t.seq, t.submitted_at))
        return tasks

    def delete(self, task_id: str) -> None:
        """Remove a task's record and output files (retention)."""
        for kind in ("json", "out", "err"):
            self.path(task_id, kind).unlink(missing_ok=True)

    def tail(self, task_id: str, kind: str, limit: int) -> Tail:
        return read_tail(self.path(task_id, kind), limit)
