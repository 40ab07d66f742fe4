"""Claude's own on-disk transcripts, read as the record of every subagent session (never a parallel record).

Where claude keeps them (2.1.328, read from its code and checked by experiment):
    <config>/projects/<slug>/<session-uuid>.jsonl
    <config> = $CLAUDE_CONFIG_DIR, else $HOME/.claude (NFC-normalised)
    <slug>   = the REAL path of the working directory (claude uses getcwd(), so a symlinked workdir resolves)
               with every character outside [a-zA-Z0-9] replaced by '-'; a slug over 200 characters is cut to
               200 and gets '-' + base36(|javaHash(path)|), javaHash being the 32-bit `h = 31*h + c` over
               UTF-16 code units. Claude itself also accepts any folder starting with the cut prefix (another
               build might hash differently), and so do we. With CLAUDE_CONFIG_DIR set,
               CLAUDE_CODE_PROJECT_DIR_NAME (if a valid [A-Za-z0-9_-]{1,64}) replaces the slug.
What one transcript says is read by transcript.py, and kept up to date incrementally by transcript_index.py
(names of every file, whole summaries of named ones only). Renaming a transcript so that it no longer ends in
`.jsonl` hides it from claude's look-ups: that is how a name is freed (`archive`).
"""

from __future__ import annotations

import builtins
import json
import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from hivesubagent.transcripts.index import TranscriptIndex
from hivesubagent.transcripts.transcript import Transcript

SLUG_MAX = 200
_PROJECT_DIR_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_RESERVED = re.compile(r"(?:con|prn|aux|nul|com[0-9]|lpt[0-9])", re.IGNORECASE)
_NOT_ALNUM = re.compile(r"[^a-zA-Z0-9]")


def java_string_hash(text: str) -> int:
    """JavaScript's `h = (h << 5) - h + charCodeAt(i) | 0` over UTF-16 code units: a signed 32-bit int."""
    data = text.encode("utf-16-le", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (h * 31 + int.from_bytes(data[i : i + 2], "little")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def project_slug(path: str) -> str:
    """Claude's project folder name for a working directory (see the module docstring)."""
    slug = _NOT_ALNUM.sub("-", path)
    if len(slug) <= SLUG_MAX:
        return slug
    return f"{slug[:SLUG_MAX]}-{_base36(abs(java_string_hash(path)))}"


def config_dir(env: Mapping[str, str]) -> Path:
    """`$CLAUDE_CONFIG_DIR`, else `$HOME/.claude`, in the environment claude runs with."""
    configured = env.get("CLAUDE_CONFIG_DIR")
    base = configured if configured else os.path.join(env.get("HOME") or os.path.expanduser("~"), ".claude")
    return Path(unicodedata.normalize("NFC", base))


@dataclass(frozen=True)
class LiveSession:
    """A claude process that claude's own `sessions/<pid>.json` says is running (checked against the pid)."""

    pid: int
    session_id: str
    name: str | None


def _proc_start_ticks(proc: psutil.Process) -> int:
    clk_tck = os.sysconf("SC_CLK_TCK")
    return round((proc.create_time() - psutil.boot_time()) * clk_tck)


@dataclass
class SessionStore:
    """Claude's transcripts for sessions run in `workdir` with environment `env`."""

    workdir: Path
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    index: TranscriptIndex = field(default_factory=TranscriptIndex, repr=False)

    @property
    def config_dir(self) -> Path:
        return config_dir(self.env)

    @property
    def projects_dir(self) -> Path:
        return self.config_dir / "projects"

    def slug(self) -> str:
        override = self.env.get("CLAUDE_CODE_PROJECT_DIR_NAME")
        if (self.env.get("CLAUDE_CONFIG_DIR") and override and _PROJECT_DIR_NAME.fullmatch(override)
                and not _RESERVED.fullmatch(override)):
            return override
        return project_slug(os.path.realpath(self.workdir))

    @property
    def project_dir(self) -> Path:
        """Where claude writes this workdir's new transcripts."""
        return self.projects_dir / self.slug()

    def project_dirs(self) -> list[Path]:
        """The project folder, plus same-prefix folders for long paths (claude accepts those too)."""
        main = self.project_dir
        dirs = [main] if main.is_dir() else []
        slug = main.name
        if len(slug) > SLUG_MAX and self.projects_dir.is_dir():
            prefix = slug[:SLUG_MAX] + "-"
            dirs += sorted(p for p in self.projects_dir.iterdir()
                           if p.name.startswith(prefix) and p != main and p.is_dir())
        return dirs

    def transcript_path(self, session_id: str) -> Path:
        """Where the transcript of `session_id` is (or will be, for a new session)."""
        for d in self.project_dirs():
            candidate = d / f"{session_id}.jsonl"
            if candidate.exists():
                return candidate
        return self.project_dir / f"{session_id}.jsonl"

    def _files(self, archived: bool = False) -> list[str]:
        """Transcript paths as strings: a folder of hundreds is listed on every call, and Path objects cost more
        than the look-ups themselves."""
        out: list[str] = []
        for d in self.project_dirs():
            try:
                with os.scandir(d) as found:  # is_file() from the directory entry: no stat per file
                    out += [e.path for e in found if _listed(e.name, archived) and e.is_file()]
            except OSError:
                continue
        return out

    def title(self, path: str | Path) -> str | None:
        """The session name of one transcript: from its tail or head, then from what is appended."""
        return self.index.name(path)

    def read(self, path: str | Path) -> Transcript:
        """The summary of one transcript, brought up to date by reading only what was appended."""
        return self.index.summary(path)

    def turn_start(self, path: str | Path) -> int:
        """The offset of the last turn's prompt in a transcript read before (0 when not known: read it all)."""
        return self.index.turn_start(path) or 0

    def _named(self, archived: bool = False) -> list[tuple[str, str]]:
        """(path, name) of every named transcript; what is remembered of vanished files is dropped."""
        files = self._files(archived=archived)
        if not archived:
            self.index.forget_except(set(files))
        return [(p, name) for p in files if (name := self.index.name(p)) is not None]

    def find_all(self, name: str) -> list[Path]:
        """Every live (not archived) transcript whose session is named `name`, newest first."""
        matches = [Path(p) for p, n in self._named() if n == name]
        return sorted(matches, key=_mtime, reverse=True)

    def find(self, name: str) -> Transcript | None:
        """The session named `name` (the newest transcript if several carry the name), parsed; or None."""
        for path in self.find_all(name):
            try:
                return self.read(path)
            except OSError:
                continue
        return None

    def list(self, include_archived: bool = False) -> builtins.list[Transcript]:  # (`list` here is the verb)
        """Every named transcript in the project folder, newest first (unnamed ones are never parsed)."""
        out = []
        for path, _ in self._named(archived=include_archived):
            try:
                out.append(self.read(path))
            except OSError:
                continue
        return sorted(out, key=lambda t: t.mtime, reverse=True)

    def archive(self, name: str) -> builtins.list[Path]:
        """Hide every live transcript named `name` from claude's look-ups by renaming it `*.jsonl.archived`.

        Never deletes and never overwrites: the new name is claimed with link(2), which fails if it exists,
        so a second archive of the same session id gets `<id>.jsonl.2.archived`, and so on."""
        archived = []
        for path in self.find_all(name):
            archived.append(archive_file(path))
        return archived

    def live_sessions(self) -> builtins.list[LiveSession]:
        """Claude processes that are running now by claude's own registry (`<config>/sessions/<pid>.json`).

        A file left behind by a killed claude is ignored: the pid must exist and have the recorded start time."""
        live = []
        folder = self.config_dir / "sessions"
        try:
            files = [p for p in folder.iterdir() if p.suffix == ".json"]
        except OSError:
            return []
        for path in files:
            try:
                record = json.loads(path.read_text())
                pid = int(record["pid"])
                proc = psutil.Process(pid)
                started = record.get("procStart")
                if started is not None and abs(_proc_start_ticks(proc) - int(started)) > 1:
                    continue
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
            except (OSError, ValueError, KeyError, TypeError, psutil.Error):
                continue
            live.append(LiveSession(pid=pid, session_id=str(record.get("sessionId")), name=record.get("name")))
        return live


def _listed(name: str, archived: bool) -> bool:
    return name.endswith(".jsonl") or (archived and ".jsonl." in name and name.endswith(".archived"))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def archive_file(path: Path) -> Path:
    """Rename one transcript to a free `*.archived` name next to it, never replacing an existing file."""
    n = 1
    while True:
        target = path.with_name(f"{path.name}.archived" if n == 1 else f"{path.name}.{n}.archived")
        try:
            os.link(path, target)
        except FileExistsError:
            n += 1
            continue
        except OSError:
            # A filesystem without hard links: rename, after checking the name is free (racy, but only
            # against another archiver of the same session, and the engine serialises those per name).
            if target.exists():
                n += 1
                continue
            os.rename(path, target)
            return target
        os.unlink(path)
        return target
