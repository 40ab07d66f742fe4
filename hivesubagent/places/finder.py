"""Finding a session's transcripts wherever it runs: claude writes them to the project folder of the
session's working directory, so each recorded working directory has a session store of its own, and a name
is looked up in its recorded directory's folder, or --workdir's. Each store has its own transcript index (an
index forgets what is not in its own folder); only --workdir's is saved across restarts (index_file.py)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path

from hivesubagent.answers.shapes import WorktreeData
from hivesubagent.errors import SubagentError
from hivesubagent.places.book import Place, PlaceBook
from hivesubagent.places.options import ClaudeOptions
from hivesubagent.places.worktrees import Worktrees
from hivesubagent.transcripts.sessions import SessionStore, Transcript

log = logging.getLogger(__name__)


class SessionPlaces:
    """The place book and a session store per working directory; `main` is --workdir's store."""

    def __init__(self, main: SessionStore, book: PlaceBook, worktrees: Worktrees):
        self.main = main
        self.book = book
        self.worktrees = worktrees
        self._stores: dict[Path, SessionStore] = {main.workdir: main}
        self._lock = threading.Lock()

    def place(self, name: str) -> Place:
        """Where `name` runs: its recorded place, else --workdir with claude's defaults."""
        return self.book.get(name) or Place(self.main.workdir)

    def new_place(self, name: str, cwd: Path, own_tree: bool, options: ClaudeOptions, old: Place | None) -> Place:
        """Where a start runs: `cwd`, or its place in a fresh worktree of the repository holding it."""
        if not own_tree:
            return Place(cwd, None, options)
        tree, inside = self.worktrees.create(name, cwd, old.worktree if old is not None else None)
        log.info("session %s: worktree %s on branch %s from %s", name, tree.path, tree.branch, tree.base[:12])
        return Place(inside, tree, options)

    def put_back(self, name: str, old: Place | None) -> None:
        """A start that failed leaves the name's record as it was (its earlier session is still the name's)."""
        try:
            if self.book.get(name) != old:
                self.book.put(name, old)
        except OSError as exc:
            log.warning("session %s: could not put back its place record: %s", name, exc)

    def worktree_stat(self, place: Place | None) -> WorktreeData | None:
        """What a session's worktree holds now (git), None for a session without one."""
        if place is None or place.worktree is None:
            return None
        return self.worktrees.stat(place.worktree)

    @staticmethod
    def check_still_there(name: str, place: Place) -> None:
        """A continue runs where the session does: refused when that directory is gone."""
        if not place.cwd.is_dir():
            raise SubagentError(f"name: {name!r} runs in {place.cwd}, which no longer exists (a removed "
                                f"worktree?): start(name={name!r}, ...) begins it afresh")

    def store_for(self, place: Place | None) -> SessionStore:
        """The store of a session's directory (--workdir's for a session without a place)."""
        return self.main if place is None else self.store(place.cwd)

    def store(self, cwd: Path) -> SessionStore:
        with self._lock:
            found = self._stores.get(cwd)
            if found is None:
                found = self._stores[cwd] = SessionStore(cwd, self.main.env)
            return found

    def store_of(self, name: str) -> SessionStore:
        return self.store(self.place(name).cwd)

    def find(self, name: str) -> Transcript | None:
        return self.store_of(name).find(name)

    def project_dir(self, name: str) -> Path:
        return self.store_of(name).project_dir

    def archive(self, name: str, new_cwd: Path) -> list[Path]:
        """Archive `name`'s transcripts where it ran and where it is about to run (--workdir's folder too)."""
        stores = {s.project_dir: s for s in (self.store_of(name), self.store(new_cwd), self.main)}
        return [path for store in stores.values() for path in store.archive(name)]

    def named(self) -> list[tuple[str, Transcript]]:
        """Every named session's newest transcript, newest first, each from its own directory's folder (a
        transcript of the name in another folder belongs to an earlier session there)."""
        places = self.book.all()
        cwds = [self.main.workdir, *dict.fromkeys(p.cwd for p in places.values())]
        found: list[Transcript] = []
        for cwd in dict.fromkeys(cwds):
            found += [t for t in self.store(cwd).list()
                      if t.name and self._runs_in(places, t.name, cwd)]
        unique: dict[str, Transcript] = {}
        for t in sorted(found, key=lambda t: t.mtime, reverse=True):
            assert t.name is not None
            unique.setdefault(t.name, t)
        return list(unique.items())

    def _runs_in(self, places: Mapping[str, Place], name: str, cwd: Path) -> bool:
        place = places.get(name)
        return (place.cwd if place is not None else self.main.workdir) == cwd
