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
A session's name is the `customTitle` of its last `{"type":"custom-title"}` entry (claude writes one when the
session starts and again at the end of every turn; the last one wins). Renaming a transcript so that it no
longer ends in `.jsonl` hides it from claude's look-ups: that is how a name is freed (`archive`).
"""

from __future__ import annotations

import json
import os
import re
import threading
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import psutil

SLUG_MAX = 200
_PROJECT_DIR_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_RESERVED = re.compile(r"(?:con|prn|aux|nul|com[0-9]|lpt[0-9])", re.IGNORECASE)
_NOT_ALNUM = re.compile(r"[^a-zA-Z0-9]")
TAIL_BYTES = 64 * 1024
PARSE_CACHE_ENTRIES = 512  # parsed transcripts kept (small objects: counts, the last turn's texts)
INTERRUPT_MARK = "[Request interrupted"

# The last turn's outcome as a transcript shows it. "no_result" is a prompt with no answer after it: the turn
# is still running, or its process died without writing one (SIGKILL, a crash): counted as interrupted.
OUTCOMES = ("completed", "error", "interrupted", "no_result")


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


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def is_prompt(entry: dict) -> bool:
    """A user entry that starts a turn: a prompt, not a tool result, meta note or interruption marker."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isSidechain") or "toolUseResult" in entry:
        return False
    if entry.get("isCompactSummary"):
        return False
    content = (entry.get("message") or {}).get("content")
    if isinstance(content, list):
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return False
        if not any(isinstance(b, dict) and b.get("type") == "text" for b in content):
            return False
    elif not isinstance(content, str):
        return False
    return not text_of(content).startswith(INTERRUPT_MARK)


@dataclass
class LastTurn:
    """The last turn as the transcript records it."""

    prompt: str = ""
    outcome: str = "no_result"
    result_text: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    cost_before_usd: float | None = None
    cost_usd: float | None = None  # this turn's: cumulative after minus cumulative before

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return max(0.0, self.ended_at - self.started_at)


@dataclass
class Transcript:
    """What one transcript file says about its session."""

    path: Path
    session_id: str
    name: str | None = None
    archived: bool = False
    turns: int = 0
    model: str | None = None
    cost_usd: float | None = None  # cumulative over every turn (claude's own cost-state)
    first_at: float | None = None
    last_at: float | None = None
    last_turn: LastTurn | None = None
    mtime: float = 0.0


class _Reader:
    """One pass over a transcript's entries, folding them into a Transcript."""

    def __init__(self, transcript: Transcript):
        self.t = transcript
        self.turn: LastTurn | None = None
        self.last_message_id: str | None = None

    def feed(self, entry: dict) -> None:
        t = self.t
        kind = entry.get("type")
        if kind == "custom-title" and isinstance(entry.get("customTitle"), str):
            t.name = entry["customTitle"]
        stamp = _timestamp(entry.get("timestamp"))
        if stamp is not None:
            t.first_at = stamp if t.first_at is None else t.first_at
            t.last_at = stamp
        if kind == "cost-state" and isinstance(entry.get("totalCostUSD"), (int, float)):
            t.cost_usd = float(entry["totalCostUSD"])
        if is_prompt(entry):
            t.turns += 1
            self.turn = LastTurn(prompt=text_of(entry["message"]["content"]), started_at=stamp, cost_before_usd=t.cost_usd)
            self.last_message_id = None
            return
        if self.turn is None:
            return
        if stamp is not None:
            self.turn.ended_at = stamp
        if kind == "user" and text_of((entry.get("message") or {}).get("content")).startswith(INTERRUPT_MARK):
            self.turn.outcome = "interrupted"
        elif kind == "assistant":
            self._assistant(entry)

    def _assistant(self, entry: dict) -> None:
        message = entry.get("message") or {}
        synthetic = message.get("model") == "<synthetic>"
        text = text_of(message.get("content"))
        if entry.get("isApiErrorMessage"):
            self.turn.outcome, self.turn.result_text = "error", text
            return
        if synthetic:
            return
        self.t.model = message.get("model") or self.t.model
        if message.get("id") != self.last_message_id:
            self.last_message_id = message.get("id")
            self.turn.result_text = ""
        if text:
            self.turn.result_text += text
        if message.get("stop_reason") in ("end_turn", "stop_sequence", "max_tokens", "refusal") and self.turn.outcome != "interrupted":
            self.turn.outcome = "completed"
        elif message.get("stop_reason") == "tool_use":
            self.turn.outcome = "no_result"

    def finish(self) -> Transcript:
        turn = self.turn
        if turn is not None:
            if turn.cost_before_usd is not None and self.t.cost_usd is not None:
                turn.cost_usd = max(0.0, self.t.cost_usd - turn.cost_before_usd)
            elif turn.cost_before_usd is None and self.t.turns == 1:
                turn.cost_usd = self.t.cost_usd
        self.t.last_turn = turn
        return self.t


def iter_entries(lines: Iterable[bytes]) -> Iterator[dict]:
    for raw in lines:
        try:
            entry = json.loads(raw)
        except ValueError:
            continue  # a torn last line while claude is writing; or a foreign line
        if isinstance(entry, dict):
            yield entry


def _session_id_of(path: Path) -> str:
    return path.name.split(".", 1)[0]


def read_transcript(path: Path) -> Transcript:
    """Parse one transcript file (raises OSError if it cannot be read)."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        reader = _Reader(Transcript(path=path, session_id=_session_id_of(path), archived=not path.name.endswith(".jsonl")))
        for entry in iter_entries(f):
            reader.feed(entry)
    transcript = reader.finish()
    transcript.mtime = st.st_mtime
    return transcript


def title_from_tail(path: Path, tail_bytes: int = TAIL_BYTES) -> tuple[bool, str | None]:
    """The last custom-title in the file's last `tail_bytes`: (found, title). Cheap for big transcripts."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - tail_bytes))
        chunk = f.read()
    for raw in reversed(chunk.split(b"\n")):
        if b'"custom-title"' not in raw:
            continue
        for entry in iter_entries([raw]):
            if entry.get("type") == "custom-title" and isinstance(entry.get("customTitle"), str):
                return True, entry["customTitle"]
    return size <= tail_bytes, None


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
    _titles: dict[Path, tuple[int, int, str | None]] = field(default_factory=dict, repr=False)
    _parsed: dict[Path, tuple[int, int, Transcript]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def config_dir(self) -> Path:
        return config_dir(self.env)

    @property
    def projects_dir(self) -> Path:
        return self.config_dir / "projects"

    def slug(self) -> str:
        override = self.env.get("CLAUDE_CODE_PROJECT_DIR_NAME")
        if self.env.get("CLAUDE_CONFIG_DIR") and override and _PROJECT_DIR_NAME.fullmatch(override) and not _RESERVED.fullmatch(override):
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
            dirs += sorted(p for p in self.projects_dir.iterdir() if p.name.startswith(prefix) and p != main and p.is_dir())
        return dirs

    def transcript_path(self, session_id: str) -> Path:
        """Where the transcript of `session_id` is (or will be, for a new session)."""
        for d in self.project_dirs():
            candidate = d / f"{session_id}.jsonl"
            if candidate.exists():
                return candidate
        return self.project_dir / f"{session_id}.jsonl"

    def _files(self, archived: bool = False) -> list[Path]:
        out: list[Path] = []
        for d in self.project_dirs():
            try:
                out += [p for p in d.iterdir() if p.name.endswith(".jsonl") and p.is_file()]
                if archived:
                    out += [p for p in d.iterdir() if ".jsonl." in p.name and p.name.endswith(".archived") and p.is_file()]
            except OSError:
                continue
        return out

    def title(self, path: Path) -> str | None:
        """The session name of one transcript (cached by size and mtime; tail first, full read if needed)."""
        try:
            st = path.stat()
        except OSError:
            return None
        key = (st.st_size, st.st_mtime_ns)
        with self._lock:
            cached = self._titles.get(path)
        if cached is not None and cached[:2] == key:
            return cached[2]
        try:
            found, name = title_from_tail(path)
            if not found:
                name = read_transcript(path).name
        except OSError:
            return None
        with self._lock:
            self._titles[path] = (*key, name)
        return name

    def read(self, path: Path) -> Transcript:
        """`read_transcript`, cached by size and mtime: `status` of every session re-reads only what changed."""
        st = path.stat()
        key = (st.st_size, st.st_mtime_ns)
        with self._lock:
            cached = self._parsed.get(path)
        if cached is not None and cached[:2] == key:
            return cached[2]
        transcript = read_transcript(path)
        with self._lock:
            if len(self._parsed) >= PARSE_CACHE_ENTRIES:
                self._parsed.pop(next(iter(self._parsed)))
            self._parsed[path] = (*key, transcript)
        return transcript

    def find_all(self, name: str) -> list[Path]:
        """Every live (not archived) transcript whose session is named `name`, newest first."""
        matches = [p for p in self._files() if self.title(p) == name]
        return sorted(matches, key=lambda p: p.stat().st_mtime if p.exists() else 0.0, reverse=True)

    def find(self, name: str) -> Transcript | None:
        """The session named `name` (the newest transcript if several carry the name), parsed; or None."""
        for path in self.find_all(name):
            try:
                return self.read(path)
            except OSError:
                continue
        return None

    def list(self, include_archived: bool = False) -> list[Transcript]:
        """Every transcript in the project folder, newest first."""
        out = []
        for path in self._files(archived=include_archived):
            try:
                out.append(self.read(path))
            except OSError:
                continue
        return sorted(out, key=lambda t: t.mtime, reverse=True)

    def archive(self, name: str) -> list[Path]:
        """Hide every live transcript named `name` from claude's look-ups by renaming it `*.jsonl.archived`.

        Never deletes and never overwrites: the new name is claimed with link(2), which fails if it exists,
        so a second archive of the same session id gets `<id>.jsonl.2.archived`, and so on."""
        archived = []
        for path in self.find_all(name):
            archived.append(archive_file(path))
        return archived

    def live_sessions(self) -> list[LiveSession]:
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
