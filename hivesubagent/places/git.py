"""Git for the worktrees, run as a subprocess: an argv list (no shell), in a session of its own (so a timeout
kills git and whatever it started, a hook included), with a time limit, never a prompt for credentials."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

GIT_TIMEOUT_SECONDS = 30.0  # one git command; worktree add of a large checkout is the slow one
OUTPUT_LIMIT = 4 * 1024 * 1024  # bytes of a command's output kept (a whole diff for the operator's CLI)
# Variables that would point git at another repository, index or work tree than the one named by -C.
_REPOSITORY_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
                         "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES")


class GitError(Exception):
    """A git command failed: the message says which and what git said."""


def git_env(base: Mapping[str, str], index_file: Path | None = None) -> dict[str, str]:
    """The daemon's environment for git: no prompts, English messages, no optional locks (a status or diff
    beside a running subagent never takes its index lock), the repository only from -C."""
    env = {k: v for k, v in base.items() if k not in _REPOSITORY_VARIABLES}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    if index_file is not None:
        env["GIT_INDEX_FILE"] = str(index_file)
    return env


def run_git(repo: Path, args: list[str], env: Mapping[str, str], timeout: float = GIT_TIMEOUT_SECONDS) -> str:
    """`git -C repo ARGS...`'s standard output; GitError when it cannot run, fails or takes too long."""
    argv = ["git", "-C", str(repo), *args]
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=dict(env), start_new_session=True, close_fds=True)
    except OSError as exc:
        raise GitError(f"cannot run git: {exc.strerror or exc} (is git on the daemon's PATH?)") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.communicate()
        raise GitError(f"`git {args[0]}` in {repo} did not finish within {timeout:g} s") from None
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise
    if proc.returncode != 0:
        said = err.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"`git {' '.join(args[:3])}` in {repo} failed: {' '.join(said[-3:]) or 'no message'}")
    return out[:OUTPUT_LIMIT].decode("utf-8", "replace")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)  # git leads its own session: its group is its pid, reaped by the caller
    except ProcessLookupError:
        pass
