"""Where a session runs, without claude: the checks of cwd and of the tool limits (each value one argv element),
the place record across restarts and against links, and git worktrees made in parallel in one repository,
refused over unmerged work, measured (new files, binary files, deletions), and the operator's `diff`."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner
from daemon_harness import wait_until

from common.config import SubagentSettings
from hivesubagent.cli import main as cli_main
from hivesubagent.errors import SubagentError
from hivesubagent.places.book import FILE_NAME, Place, PlaceBook
from hivesubagent.places.git import GitError, run_git
from hivesubagent.places.options import ClaudeOptions
from hivesubagent.places.worktrees import Worktrees
from hivesubagent.requests import check_continue, check_start, cwd_roots
from hivesubagent.turns import claude

GIT_ID = ["-c", "user.name=test", "-c", "user.email=test@example.invalid"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *GIT_ID, *args], check=True, capture_output=True, text=True,
                          timeout=30).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "work" / "repo"
    (path / "sub").mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("one\ntwo\nthree\n")
    (path / "sub" / "keep").write_text("k\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "base")
    return path


@pytest.fixture
def trees(tmp_path: Path) -> Worktrees:
    return Worktrees(tmp_path / "state" / "worktrees", dict(os.environ), tmp_path / "state" / "scratch")


def start_args(prompt: Path, **more):
    return {"name": "s", "prompt_file": str(prompt), **more}


def test_cwd_is_checked_and_confined_to_the_roots(tmp_path):
    work = tmp_path / "work"
    (work / "inside").mkdir(parents=True)
    (work / "escape").symlink_to(tmp_path)  # a link inside the root to outside it
    (work / "file").write_text("x")
    settings = SubagentSettings(workdir=work, state_dir=tmp_path / "state")
    prompt = tmp_path / "p.md"
    prompt.write_text("p")
    assert check_start(start_args(prompt), settings).cwd == work.resolve()
    assert check_start(start_args(prompt, cwd=str(work / "inside")), settings).cwd == work / "inside"
    for bad, says in ((str(work / "escape"), "outside the directories sessions may run in"),
                      ("/", "outside"), (str(work / "nope"), "does not exist"), (str(work / "file"), "not a directory"),
                      ("inside", "must be an absolute path"), (str(work) + "\0x", "without NUL"), (7, "non-empty")):
        with pytest.raises(SubagentError, match="^cwd: .*" + says):
            check_start(start_args(prompt, cwd=bad), settings)
    wider = replace(settings, allowed_cwd_roots=(str(tmp_path),))
    assert check_start(start_args(prompt, cwd=str(work / "escape")), wider).cwd == tmp_path.resolve()
    with pytest.raises(ValueError, match="allowed_cwd_roots: 'relative'"):
        cwd_roots(("relative",), work)
    with pytest.raises(SubagentError, match="^worktree: must be true or false"):
        check_start(start_args(prompt, worktree="yes"), settings)


def test_tool_limits_are_checked_and_each_value_is_one_argv_element(tmp_path):
    settings = SubagentSettings(workdir=tmp_path, state_dir=tmp_path / "state")
    prompt = tmp_path / "p.md"
    prompt.write_text("p")
    good = check_start(start_args(prompt, tools=["Bash", "Read"], allowed_tools=["Bash(git *)", "Read(./src/**)"],
                                  disallowed_tools=["Bash(rm -rf *)"], effort="xhigh"), settings).options
    argv = claude.start_argv("claude", "s", "id", "/dev/fd/3", None, options=good)
    at = argv.index("--tools")
    assert argv[at:at + 10] == ["--tools", "Bash", "Read", "--allowedTools", "Bash(git *)", "Read(./src/**)",
                                "--disallowedTools", "Bash(rm -rf *)", "--effort", "xhigh"]
    assert ClaudeOptions(tools=()).flags() == ["--tools", ""]  # no tool at all
    for field, value, says in (("allowed_tools", ["--dangerously-load"], "each entry must be"),
                               ("allowed_tools", ["Bash(a)b"], "each entry must be"),
                               ("disallowed_tools", ["Bash(x\ny)"], "each entry must be"),
                               ("disallowed_tools", ["Bash((x))"], "each entry must be"),
                               ("tools", ["Bash(git *)"], "a tool name"), ("tools", ["Bash", "Bash"], "twice"),
                               ("tools", "Bash", "must be a list"), ("tools", ["T"] * 65, "at most 64"),
                               ("effort", "huge", "must be one of low, medium")):
        with pytest.raises(SubagentError, match=f"^{field}: .*{says}"):
            check_start(start_args(prompt, **{field: value}), settings)
    turn = check_continue({"name": "s", "prompt": "go", "effort": "low"}, settings).options
    merged = turn.over(good)
    assert merged.effort == "low" and merged.tools == ("Bash", "Read") and merged.allowed == good.allowed
    assert ClaudeOptions.from_dict(merged.as_dict()) == merged


def test_the_place_book_survives_a_restart_and_never_follows_a_link(tmp_path, caplog):
    state = tmp_path / "state"
    place = Place(tmp_path, None, ClaudeOptions(tools=("Read",), effort="low"))
    PlaceBook(state).put("a", place)
    assert PlaceBook(state).get("a") == place
    assert (state / FILE_NAME).stat().st_mode & 0o777 == 0o600
    PlaceBook(state).put("a", None)
    assert PlaceBook(state).get("a") is None
    (state / FILE_NAME).unlink()
    (tmp_path / "planted.json").write_text(json.dumps({"format": 1, "places": {"a": place.as_dict()}}))
    (state / FILE_NAME).symlink_to(tmp_path / "planted.json")
    with caplog.at_level(logging.WARNING):
        assert PlaceBook(state).get("a") is None
    assert "not read" in caplog.text
    (state / FILE_NAME).unlink()
    (state / FILE_NAME).write_text("{not json")
    assert PlaceBook(state).all() == {}


def test_parallel_worktrees_in_one_repository_all_succeed(repo, trees):
    made, errors = {}, []

    def create(name: str) -> None:
        try:
            made[name] = trees.create(name, repo / "sub", None)
        except Exception as exc:  # noqa: BLE001 - collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(f"w{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(made) == 8
    base = git(repo, "rev-parse", "HEAD").strip()
    for name, (tree, cwd) in made.items():
        assert cwd == trees.root / name / "sub" and cwd.is_dir()
        assert (tree.branch, tree.base, tree.repo) == (f"hive/{name}", base, str(repo))
    assert len(git(repo, "worktree", "list").splitlines()) == 9


def test_an_old_worktree_with_work_is_never_removed(repo, trees):
    tree, _ = trees.create("x", repo, None)
    path = Path(tree.path)
    again, _ = trees.create("x", repo, tree)  # clean: removed and made afresh
    assert again.path == tree.path
    (path / "new.txt").write_text("n\n")
    with pytest.raises(SubagentError, match=r"1 uncommitted change\(s\) \(new.txt\).*worktree remove --force"):
        trees.create("x", repo, tree)
    git(path, "add", "new.txt")
    git(path, "commit", "-qm", "add new")
    with pytest.raises(SubagentError, match=r"1 commit\(s\) \([0-9a-f]+ add new\).*merge hive/x"):
        trees.create("x", repo, tree)
    assert (path / "new.txt").exists()
    git(path, "worktree", "remove", str(path))  # the agent removed the worktree but kept the branch
    with pytest.raises(SubagentError, match=r"1 commit\(s\)"):
        trees.create("x", repo, tree)
    git(repo, "merge", "-q", "hive/x")  # merged: nothing is lost by starting afresh
    fresh, _ = trees.create("x", repo, tree)
    assert fresh.base == git(repo, "rev-parse", "HEAD").strip()
    (trees.root / "y").mkdir()
    with pytest.raises(SubagentError, match="is not a git worktree"):
        trees.create("y", repo, None)
    with pytest.raises(SubagentError, match="is not inside a git repository"):
        trees.create("z", trees.root / "y", None)
    (repo / "inner").mkdir()
    confined = Worktrees(trees.root, trees.env, trees.scratch, (repo / "inner",))  # the repository's top is outside
    with pytest.raises(SubagentError, match=f"^worktree: the repository holding {repo}/inner is {repo}, outside"):
        confined.create("c", repo / "inner", None)
    (repo / "untracked-dir").mkdir()
    with pytest.raises(SubagentError, match="^cwd: untracked-dir is not in the repository's HEAD"):
        trees.create("u", repo / "untracked-dir", None)
    assert not (trees.root / "u").exists() and "hive/u" not in git(repo, "branch", "--list")
    assert trees.create("u", repo, None)[1] == trees.root / "u"  # nothing left in the way


def test_the_stat_counts_commits_changes_new_and_binary_files(repo, trees, tmp_path):
    tree, _ = trees.create("m", repo, None)
    path = Path(tree.path)
    (path / "README").write_text("one\nTWO\nthree\nfour\n")  # 2 insertions, 1 deletion, uncommitted
    (path / "sub" / "keep").unlink()
    (path / "blob.bin").write_bytes(b"\0\1\2" * 10)
    git(path, "add", "blob.bin")
    git(path, "commit", "-qm", "add a blob")
    (path / "untracked.txt").write_text("a\nb\n")
    stat = trees.stat(tree)
    assert stat["commits"] == 1 and stat["last_commits"][0].endswith(" add a blob")
    files = {f["file"]: (f["insertions"], f["deletions"]) for f in stat["files"]}
    assert files == {"README": (2, 1), "blob.bin": (None, None), "sub/keep": (0, 1), "untracked.txt": (2, 0)}
    assert (stat["files_changed"], stat["insertions"], stat["deletions"]) == (4, 4, 2)
    assert "untracked.txt" in git(path, "status", "--porcelain")  # its own index untouched: still untracked
    blob = git(path, "hash-object", "untracked.txt").strip()
    assert subprocess.run(["git", "-C", str(path), "cat-file", "-e", blob]).returncode != 0  # nothing stored
    whole = trees.diff(tree)
    assert "+four" in whole and "+a" in whole and "Binary files" in whole
    # the operator's view of it, from disk
    book = PlaceBook(tmp_path / "state")
    book.put("m", Place(path, tree))
    env = {"HOME": str(tmp_path / "home"), "PATH": os.environ["PATH"]}
    result = CliRunner().invoke(cli_main, ["diff", "m", "--workdir", str(repo), "--state-dir", str(tmp_path / "state")],
                                env=env)
    assert result.exit_code == 0, result.output
    assert f"worktree: {path} (branch hive/m" in result.output and "+four" in result.output
    stat_only = CliRunner().invoke(cli_main, ["diff", "m", "--stat", "--workdir", str(repo), "--state-dir",
                                              str(tmp_path / "state")], env=env)
    assert "files changed: 4, +4 -2" in stat_only.output and "+four" not in stat_only.output
    none = CliRunner().invoke(cli_main, ["diff", "other", "--workdir", str(repo), "--state-dir",
                                         str(tmp_path / "state")], env=env)
    assert none.exit_code != 0 and "has no worktree" in none.output


def test_a_git_that_hangs_is_killed_at_its_time_limit(repo):
    began = time.monotonic()
    with pytest.raises(GitError, match="did not finish within 0.5 s"):
        run_git(repo, ["-c", "alias.hang=!sleep 30.25 #", "hang"], dict(os.environ), timeout=0.5)
    assert time.monotonic() - began < 10

    def left() -> list:  # the alias's shell and its sleep died with git's group (zombies aside, not yet reaped)
        return [p for p in psutil.process_iter(["cmdline", "status"])
                if "30.25" in (p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE]

    wait_until(lambda: not left(), 5, "the hung git's processes to be gone")


def test_what_a_worktree_holds_is_bounded_in_the_answer(repo, trees):
    from hivesubagent.answers.place_texts import place_lines

    tree, _ = trees.create("big", repo, None)
    deep = Path(tree.path) / ("d" * 200) / ("e" * 200)
    deep.mkdir(parents=True)
    for i in range(40):
        (deep / f"{i:02d}-{'f' * 200}.txt").write_text("x\n")
    for i in range(7):
        git(Path(tree.path), "commit", "-q", "--allow-empty", "-m", f"commit {i} " + "s" * 300)
    stat = trees.stat(tree)
    assert stat["files_changed"] == 40 and len(stat["files"]) == 20 and stat["files_more"] == 20
    assert stat["commits"] == 7 and len(stat["last_commits"]) == 5
    assert all(len(f["file"]) <= 120 and f["file"].startswith("…") for f in stat["files"])
    text = "\n".join(place_lines({"cwd": tree.path, "worktree": stat}))
    assert len(text.encode()) < 6 * 1024 and "and 20 more" in text
    with pytest.raises(SubagentError) as refused:
        trees.create("big", repo, tree)
    assert len(str(refused.value).encode()) < 6 * 1024 and "7 commit(s)" in str(refused.value)


def test_sessions_in_several_directories_are_listed_found_and_archived_in_their_own(
        engine_factory, fake_claude_bin, fake_env, prompt_file, tmp_path):
    """With the fake claude (which keys its transcripts by its cwd as claude does): a session in a cwd of its
    own is found there after a restart, listed beside --workdir's, and a failed start leaves its record."""
    from hivesubagent.tools import build_registry

    engine, todos = engine_factory(fake_claude_bin, fake_env, allowed_cwd_roots=(str(tmp_path),))
    other = tmp_path / "other"
    other.mkdir()
    engine.start("home", str(prompt_file), trigger="FAKE:reply=in workdir")
    engine.start("away", str(prompt_file), trigger="FAKE:reply=elsewhere", cwd=str(other), effort="low")
    todos.wait_upserts("home"), todos.wait_upserts("away")
    engine.shutdown()
    again, todos2 = engine_factory(fake_claude_bin, fake_env, allowed_cwd_roots=(str(tmp_path),))
    listing = again.status()["sessions"]
    assert {s["name"]: s.get("cwd") for s in listing} == {"home": None, "away": str(other)}
    assert again.status("away")["options"] == {"effort": "low"}
    assert Path(again.status("away")["transcript"]).parent.name == str(other).replace("/", "-").replace("_", "-")
    assert "cwd=" + str(other) in build_registry(again).call("status", {}).text
    home = again.status("home")["transcript"]
    again.status()  # listing another folder never drops what --workdir's index remembers of its own
    assert home in again.sessions.index._entries
    # a start that cannot run claude leaves the name's record as it was
    broken, _ = engine_factory("/nonexistent/claude", fake_env, allowed_cwd_roots=(str(tmp_path),))
    with pytest.raises(SubagentError, match="cannot run claude_bin"):
        broken.start("away", str(prompt_file), cwd=str(tmp_path))
    assert broken.places.place("away").cwd == other and broken.status("away")["turns"] == 1
    # the same name started in --workdir: the earlier session in `other` is archived, the record forgotten
    again.start("away", str(prompt_file), trigger="FAKE:reply=back home")
    todos2.wait_upserts("away")
    assert "cwd" not in again.status("away") and again.places.book.get("away") is None
    assert len(list(Path(fake_env["HOME"]).glob(".claude/projects/*-other/*.jsonl.archived"))) == 1


def test_the_cli_passes_cwd_worktree_and_tool_limits_as_the_tools_take_them(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from common.cli_base import DaemonClient

    sent = []
    monkeypatch.setattr(DaemonClient, "call", lambda self, tool, args, **kw: sent.append((tool, dict(args)))
                        or SimpleNamespace(text="ok", data={}))
    runner = CliRunner()
    done = runner.invoke(cli_main, ["start", "s", str(tmp_path / "p.md"), "--cwd", str(tmp_path), "--worktree",
                                    "--tools", "Read", "--tools", "Grep", "--allowed-tool", "Bash(git *)",
                                    "--disallowed-tool", "WebFetch", "--effort", "low"])
    assert done.exit_code == 0, done.output
    assert sent[-1] == ("start", {"name": "s", "prompt_file": str(tmp_path / "p.md"), "cwd": str(tmp_path),
                                  "worktree": True, "tools": ["Read", "Grep"], "allowed_tools": ["Bash(git *)"],
                                  "disallowed_tools": ["WebFetch"], "effort": "low"})
    assert runner.invoke(cli_main, ["continue", "s", "go", "--no-tools", "--effort", "max"]).exit_code == 0
    assert sent[-1] == ("continue", {"name": "s", "prompt": "go", "tools": [], "effort": "max"})
    both = runner.invoke(cli_main, ["continue", "s", "go", "--no-tools", "--tools", "Read"])
    assert both.exit_code == 2 and "--tools or --no-tools" in both.output
