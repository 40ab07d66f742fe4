"""A git worktree of its own for a session: made on a new branch `hive/<name>` from the repository's HEAD,
kept after the turn, never removed while it holds work that is on no other branch; and what was done in it
(the diff against its base, commits made) measured for the answers.

Creation is serialised per repository (git's own locks make concurrent `worktree add`s in one repository
fail), by a lock per git common directory; different repositories never wait for each other. Every git call
is run_git's: a subprocess with a time limit, from the calling worker thread.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from common.humanize import cut, one_line, tail
from hivesubagent.answers.shapes import FileStat, WorktreeData
from hivesubagent.errors import SubagentError
from hivesubagent.places.git import GIT_TIMEOUT_SECONDS, GitError, git_env, run_git

BRANCH_PREFIX = "hive/"
FILES_SHOWN = 20
COMMITS_SHOWN = 5
# What one file name, commit line or git error may take of an answer: 20 files and 5 commits stay well
# inside the 8 KiB an answer is bounded to.
PATH_CHARS = 120
COMMIT_CHARS = 100
ERROR_CHARS = 500
STAT_TIMEOUT_SECONDS = 10.0  # each git call of a stat: a status(name) or a turn's end waits for it


@dataclass(frozen=True)
class Worktree:
    """A session's worktree: where it is, its branch, the commit it started from, the checkout it came from."""

    path: str
    branch: str
    base: str
    repo: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Worktree:
        return cls(str(data["path"]), str(data["branch"]), str(data["base"]), str(data["repo"]))


def within(path: str, roots: tuple[Path, ...]) -> bool:
    """`path` (a real path) is one of `roots` or inside one."""
    return any(path == str(r) or path.startswith(str(r).rstrip("/") + "/") for r in roots)


class Worktrees:
    """The worktrees under `root` (the daemon's state directory's worktrees/), made and measured with git."""

    def __init__(self, root: Path, env: Mapping[str, str], scratch: Path, cwd_roots: tuple[Path, ...] = ()):
        """`cwd_roots`: where sessions may run (the daemon's --allowed-cwd-roots); a repository whose top is
        outside them is refused (its worktree would check out files the session may not work in)."""
        self.root = root
        self.cwd_roots = cwd_roots
        self.env = git_env(env)
        self.scratch = scratch  # the temporary index of a diff
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def _lock(self, common_dir: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(common_dir, threading.Lock())

    def create(self, name: str, cwd: Path, old: Worktree | None) -> tuple[Worktree, Path]:
        """A fresh worktree for session `name` of the repository holding `cwd`, and the session's working
        directory in it (cwd's place in the checkout). `old`: the name's earlier worktree, if recorded."""
        top = self._git_or_refuse(cwd, ["rev-parse", "--show-toplevel"],
                                  f"cwd: {cwd} is not inside a git repository (worktree=true needs one)").strip()
        common = os.path.realpath(os.path.join(top, self._git_or_refuse(
            Path(top), ["rev-parse", "--git-common-dir"], "worktree: cannot find the repository's git folder").strip()))
        if self.cwd_roots and not within(top, self.cwd_roots):
            raise SubagentError(f"worktree: the repository holding {cwd} is {top}, outside the directories sessions "
                                f"may run in ({', '.join(map(str, self.cwd_roots))}): give a cwd in a repository "
                                "inside them, or no worktree")
        inside = os.path.relpath(cwd, top)
        path, branch = self.root / name, BRANCH_PREFIX + name
        with self._lock(common):
            base = self._git_or_refuse(Path(top), ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
                                       f"worktree: the repository {top} has no commit yet (HEAD names none)").strip()
            self._clear_old(Path(top), path, branch, old)
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._git_or_refuse(Path(top), ["worktree", "add", "-b", branch, str(path), base],
                                f"worktree: could not create {path} on branch {branch}")
            made = Worktree(str(path), branch, base, top)
            where = path if inside == "." else path / inside
            if not where.is_dir():  # cwd is a directory git does not track (untracked, ignored, empty)
                self._clear_old(Path(top), path, branch, made)
                raise SubagentError(f"cwd: {inside} is not in the repository's HEAD (untracked or ignored), so a "
                                    f"worktree of it has no such directory: give a cwd git tracks, or {top}")
        return made, where

    def _git_or_refuse(self, repo: Path, args: list[str], refusal: str) -> str:
        try:
            return run_git(repo, args, self.env)
        except GitError as exc:
            raise SubagentError(f"{refusal}: {exc}") from None

    def _clear_old(self, top: Path, path: Path, branch: str, old: Worktree | None) -> None:
        """Remove the name's earlier worktree and branch when they hold nothing that is on no other branch;
        refuse the start otherwise, saying what is there and how to keep or drop it."""
        has_branch = bool(self._quiet(top, ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"]))
        if not path.exists() and not has_branch:
            return
        repo = Path(old.repo) if old is not None and path.exists() else top
        if path.exists() and not (path / ".git").exists():
            raise SubagentError(f"worktree: {path} exists and is not a git worktree: move it away, then start again")
        work = self._unmerged(path if path.exists() else repo, "HEAD" if path.exists() else branch, branch,
                              old.base if old is not None else None, path.exists())
        if work:
            raise SubagentError(
                f"worktree: the earlier worktree of this name, {path} (branch {branch}), holds work on no other "
                f"branch: {work}. Keep it: merge it (git -C {repo} merge {branch}, after committing in {path}) or "
                f"start under another name. Drop it: git -C {repo} worktree remove --force {path} && git -C {repo} "
                f"branch -D {branch}. Then start again.")
        if path.exists():
            self._git_or_refuse(repo, ["worktree", "remove", "--force", str(path)],
                                f"worktree: could not remove the earlier worktree {path}")
        self._quiet(repo, ["worktree", "prune"])
        if self._quiet(repo, ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"]):
            self._git_or_refuse(repo, ["branch", "-D", branch], f"worktree: could not delete the branch {branch}")

    def _unmerged(self, where: Path, head: str, branch: str, base: str | None, checkout: bool) -> str:
        """What `head` has that no other branch (nor `base`) has, and a checkout's uncommitted changes; ''."""
        found = []
        not_in = [base] if base else []
        commits = self._git_or_refuse(where, ["log", "--format=%h %s", head, "--not", *not_in,
                                              f"--exclude={branch}", "--branches"],
                                      "worktree: cannot read the earlier worktree's commits").splitlines()
        if commits:
            shown = "; ".join(one_line(c, COMMIT_CHARS) for c in commits[:COMMITS_SHOWN])
            found.append(f"{len(commits)} commit(s) ({shown}{', ...' if len(commits) > COMMITS_SHOWN else ''})")
        if checkout:
            changed = self._git_or_refuse(where, ["status", "--porcelain", "--untracked-files=all"],
                                          "worktree: cannot read the earlier worktree's changes").splitlines()
            if changed:
                shown = ", ".join(tail(line[3:], PATH_CHARS) for line in changed[:FILES_SHOWN])
                shown += ", ..." if len(changed) > FILES_SHOWN else ""
                found.append(f"{len(changed)} uncommitted change(s) ({shown})")
        return "; ".join(found)

    def _quiet(self, repo: Path, args: list[str]) -> str:
        try:
            return run_git(repo, args, self.env)
        except GitError:
            return ""

    # -------------------------------------------------------------------------------------- what was done

    def stat(self, wt: Worktree) -> WorktreeData:
        """The worktree's work against its base: commits made, and the diff (committed or not, new files
        included) as files, insertions and deletions; `error` instead when git cannot tell."""
        out = cast(WorktreeData, wt.as_dict())
        try:
            commits = run_git(Path(wt.path), ["log", "--format=%h %s", f"{wt.base}..HEAD"], self.env,
                              STAT_TIMEOUT_SECONDS).splitlines()
            numstat = self._diff(wt, ["--numstat", "-z"], STAT_TIMEOUT_SECONDS)
        except GitError as exc:
            return {**out, "error": cut(str(exc), ERROR_CHARS)}
        files: list[FileStat] = []
        insertions, deletions = 0, 0
        for record in numstat.split("\0"):
            added, _, rest = record.partition("\t")
            removed, _, file = rest.partition("\t")
            if not file:
                continue
            binary = added == "-"
            insertions += 0 if binary else int(added)
            deletions += 0 if binary else int(removed)
            files.append({"file": tail(file, PATH_CHARS), "insertions": None if binary else int(added),
                          "deletions": None if binary else int(removed)})
        last = [one_line(c, COMMIT_CHARS) for c in commits[:COMMITS_SHOWN]]
        return {**out, "commits": len(commits), "last_commits": last, "files_changed": len(files),
                "insertions": insertions, "deletions": deletions, "files": files[:FILES_SHOWN],
                "files_more": max(0, len(files) - FILES_SHOWN)}

    def diff(self, wt: Worktree) -> str:
        """The whole diff of the worktree against its base (new files included), for the operator."""
        return self._diff(wt, ["--stat", "--patch"])

    def _diff(self, wt: Worktree, how: list[str], timeout: float = GIT_TIMEOUT_SECONDS) -> str:
        """`git diff BASE` of the working tree, over a copy of the worktree's index in which every untracked
        file is marked intent-to-add: what a commit of everything would hold, new files counted, no object
        written for them (a large untracked file is read, never stored) and the worktree's own index
        untouched."""
        here = Path(wt.path)
        index = Path(run_git(here, ["rev-parse", "--path-format=absolute", "--git-path", "index"], self.env).strip())
        self.scratch.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.TemporaryDirectory(dir=self.scratch) as tmp:
            copy = Path(tmp) / "index"
            if index.exists():
                shutil.copyfile(index, copy)
            env = git_env(self.env, copy)
            run_git(here, ["add", "--all", "--intent-to-add"], env, timeout)
            return run_git(here, ["diff", "--no-renames", "--no-color", *how, wt.base], env, timeout)
