"""Where each session runs, kept in the state directory: its working directory, its worktree and the tool
limits and effort it was started with. Claude keys its transcripts by the working directory, so a session
started elsewhere than --workdir is found again (after a restart too) only through this record; a session
missing from it runs in --workdir with claude's defaults, as every session did before it had a place.

The file (session-places.json, 0600, never read or written through a link) is replaced whole on each change,
so a reader finds the old record or the new one. One lock orders the changes; readers get a copy.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.disk.safe_files import read_own
from common.disk.whole_files import replace_whole
from hivesubagent.places.options import NO_OPTIONS, ClaudeOptions
from hivesubagent.places.worktrees import Worktree

log = logging.getLogger(__name__)

FILE_NAME = "session-places.json"
FORMAT = 1


@dataclass(frozen=True)
class Place:
    """Where one session runs and with what: `cwd` (a real path), its worktree if it has one, its options."""

    cwd: Path
    worktree: Worktree | None = None
    options: ClaudeOptions = field(default=NO_OPTIONS)

    def as_dict(self) -> dict[str, Any]:
        return {"cwd": str(self.cwd), "worktree": None if self.worktree is None else self.worktree.as_dict(),
                "options": self.options.as_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Place:
        tree = data.get("worktree")
        return cls(Path(data["cwd"]), None if tree is None else Worktree.from_dict(tree),
                   ClaudeOptions.from_dict(data.get("options") or {}))


class PlaceBook:
    """The record of every session's place, by name."""

    def __init__(self, state_dir: Path, own: bool = True):
        """`own`: the daemon's (the file must be its user's); False: an operator's reading of it (any owner)."""
        self.path = Path(state_dir) / FILE_NAME
        self._lock = threading.Lock()
        self._places = self._load(own)

    def _load(self, own: bool) -> dict[str, Place]:
        try:
            data = json.loads(read_own(str(self.path)) if own else _read_no_link(self.path))
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, not {FORMAT}")
            return {str(name): Place.from_dict(p) for name, p in data["places"].items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            # Never a crash at start: the sessions it named are then looked for in --workdir only.
            log.warning("session places %s not read (%s): sessions started outside --workdir are not found",
                        self.path, exc)
            return {}

    def get(self, name: str) -> Place | None:
        with self._lock:
            return self._places.get(name)

    def all(self) -> dict[str, Place]:
        with self._lock:
            return dict(self._places)

    def put(self, name: str, place: Place | None) -> None:
        """Record `name`'s place (None: forget it); the file is replaced before this returns."""
        with self._lock:
            if self._places.get(name) == place:
                return  # (a session in --workdir with claude's defaults, as most are: no write)
            places = dict(self._places)
            if place is None:
                places.pop(name, None)
            else:
                places[name] = place
            data = {"format": FORMAT, "places": {n: p.as_dict() for n, p in sorted(places.items())}}
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            replace_whole(str(self.path), json.dumps(data).encode(),
                          str(self.path.with_name(f".{FILE_NAME}.{os.getpid()}.{threading.get_ident()}")))
            self._places = places


def _read_no_link(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        return f.read(16 * 1024 * 1024)
