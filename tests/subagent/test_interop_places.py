"""Where a session works, against the REAL claude CLI (2.1.328) and the Messages API mock, in scratch git
repositories: a `cwd` of its own, a git worktree each (parallel starts in one repository, the diff stat of
each, continue after a restart, a refused reuse of a worktree holding work), and the tool limits and effort
on claude's own command line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from daemon_harness import sink_todos, wait_until

from common.protocol.argument_errors import ToolArgumentsError
from hivesubagent.errors import SubagentError
from hivesubagent.tools import build_registry

pytestmark = pytest.mark.interop

BIN = Path(sys.executable).parent
GIT_ID = ["-c", "user.name=test", "-c", "user.email=test@example.invalid"]


def tool(name: str, **arguments) -> str:
    return f"MOCK:tool={name} {json.dumps(arguments)}"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *GIT_ID, *args], check=True, capture_output=True,
                          text=True, timeout=30).stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("base\n")
    (path / "sub").mkdir()
    (path / "sub" / "keep").write_text("k\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "base")
    return path


def last_bash_output(engine, name: str) -> str:
    return engine.steps(name)["steps_page"]["text"]


def test_a_session_runs_in_its_cwd_and_continues_there(engine_factory, claude_bin, real_env, prompt_file, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    engine, todos = engine_factory(claude_bin, real_env, allowed_cwd_roots=(str(tmp_path),))
    view = engine.start("here", str(prompt_file), trigger="here-1\n" + tool("Bash", command="pwd"), cwd=str(project))
    assert view["cwd"] == str(project)
    end = todos.wait_upserts("here")[0]["data"]
    assert end["outcome"]["outcome"] == "completed", end["outcome"]
    assert f"tool said: {project}" in last_bash_output(engine, "here")  # (the mock quotes the tool's output)
    assert Path(end["transcript"]).parent.name == str(project).replace("/", "-").replace("_", "-")
    engine.shutdown()
    restarted, todos2 = engine_factory(claude_bin, real_env, allowed_cwd_roots=(str(tmp_path),))
    assert restarted.status("here")["cwd"] == str(project)
    restarted.continue_("here", "here-2 " + tool("Bash", command="pwd > where.txt"))
    assert todos2.wait_upserts("here")[0]["data"]["outcome"]["outcome"] == "completed"
    assert (project / "where.txt").read_text() == f"{project}\n"
    # refused before anything runs: outside the roots, missing, not a directory
    for bad, says in (("/", "outside the directories"), (str(tmp_path / "nope"), "does not exist"),
                      (str(prompt_file), "is not a directory"), ("rel/path", "must be an absolute path")):
        with pytest.raises(SubagentError, match=f"^cwd: .*{says}"):
            restarted.start("bad", str(prompt_file), cwd=bad)


def test_parallel_worktree_sessions_each_work_on_their_own_branch(engine_factory, claude_bin, real_env, prompt_file,
                                                                  tmp_path):
    engine, todos = engine_factory(claude_bin, real_env)
    repo = make_repo(engine.workdir / "repo")
    tools = build_registry(engine)
    commit = "git -c user.name=t -c user.email=t@e.invalid commit -qm 'add a'"
    triggers = {"wa": tool("Bash", command=f"printf 'one\\ntwo\\n' > a.txt && git add a.txt && {commit} && pwd"),
                "wb": tool("Bash", command="printf 'x\\n' > b.txt && echo more >> README && pwd")}
    answers = {}
    import threading

    def start(name: str) -> None:
        answers[name] = tools.call("start", {"name": name, "prompt_file": str(prompt_file), "worktree": True,
                                             "cwd": str(repo / "sub"), "trigger": f"{name}-1\n{triggers[name]}"})

    threads = [threading.Thread(target=start, args=(n,)) for n in triggers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(not a.is_error for a in answers.values()), {n: a.text for n, a in answers.items()}
    ends = {n: todos.wait_upserts(n)[0] for n in triggers}
    state = Path(engine.settings.state_dir).absolute()
    for name in triggers:
        data = ends[name]["data"]
        tree = state / "worktrees" / name
        assert data["outcome"]["outcome"] == "completed", data["outcome"]
        assert data["cwd"] == str(tree / "sub")
        assert f"{tree}/sub" in last_bash_output(engine, name).split("tool said:")[-1]
        assert data["worktree"]["branch"] == f"hive/{name}" and data["worktree"]["path"] == str(tree)
        assert f"worktree: {tree} (branch hive/{name}" in ends[name]["body"]
    a, b = ends["wa"]["data"]["worktree"], ends["wb"]["data"]["worktree"]
    assert (a["commits"], a["files_changed"], a["insertions"], a["deletions"]) == (1, 1, 2, 0), a
    assert a["files"] == [{"file": "sub/a.txt", "insertions": 2, "deletions": 0}]
    assert (b["commits"], b["files_changed"], b["insertions"], b["deletions"]) == (0, 2, 2, 0), b
    assert (state / "worktrees/wa/sub/a.txt").exists() and not (state / "worktrees/wb/sub/a.txt").exists()
    assert (state / "worktrees/wb/sub/b.txt").exists() and not (state / "worktrees/wa/sub/b.txt").exists()
    assert not (repo / "sub/a.txt").exists() and not (repo / "sub/b.txt").exists()  # the checkout is untouched
    assert git(repo, "show", "hive/wa:sub/a.txt") == "one\ntwo\n"
    assert "sub/a.txt" not in git(repo, "ls-tree", "-r", "--name-only", "hive/wb")
    status = tools.call("status", {"name": "wa"})
    assert "commits: 1" in status.text and status.data["worktree"]["insertions"] == 2
    listed = [line for line in tools.call("status", {}).text.splitlines() if line.startswith("name=wb ")]
    assert f"cwd={state}/worktrees/wb/sub" in listed[0] and "branch=hive/wb" in listed[0], listed

    # a restart, then continue: in the worktree
    engine.shutdown()
    restarted, todos2 = engine_factory(claude_bin, real_env)
    restarted.continue_("wa", "wa-2 " + tool("Bash", command="pwd > here.txt"))
    assert todos2.wait_upserts("wa")[0]["data"]["outcome"]["outcome"] == "completed"
    assert (state / "worktrees/wa/sub/here.txt").read_text() == f"{state}/worktrees/wa/sub\n"

    # a start of the same name is refused while the worktree holds work on no other branch
    with pytest.raises(SubagentError, match=r"1 commit\(s\) \([0-9a-f]+ add a\).*merge hive/wa.*branch -D hive/wa"):
        restarted.start("wa", str(prompt_file), worktree=True, cwd=str(repo))
    with pytest.raises(SubagentError, match=r"uncommitted change\(s\)"):
        restarted.start("wb", str(prompt_file), worktree=True, cwd=str(repo))
    # merged back, the name starts afresh: a new worktree from the repository's HEAD
    git(repo, "merge", "-q", "hive/wa")
    (state / "worktrees/wa/sub/here.txt").unlink()  # (the continue's file: uncommitted work, refused too)
    view = restarted.start("wa", str(prompt_file), worktree=True, cwd=str(repo), trigger="wa-3 MOCK:reply=ok")
    assert view["worktree"]["base"] == git(repo, "rev-parse", "HEAD").strip()
    assert todos2.wait_upserts("wa", 2)[1]["data"]["worktree"]["files_changed"] == 0


def test_tool_limits_and_effort_reach_claudes_command_line(engine_factory, claude_bin, real_env, prompt_file,
                                                           mock_api):
    engine, todos = engine_factory(claude_bin, real_env)
    tools = build_registry(engine)
    args = {"name": "limited", "prompt_file": str(prompt_file), "trigger": "limited-1 MOCK:hold=limited",
            "tools": ["Bash", "Read"], "allowed_tools": ["Bash(git *)", "Read"],
            "disallowed_tools": ["Bash(rm *)"], "effort": "low"}
    answer = tools.call("start", args)
    assert not answer.is_error, answer.text
    argv = Path(f"/proc/{answer.data['pid']}/cmdline").read_bytes().split(b"\0")
    assert [b"--tools", b"Bash", b"Read", b"--allowedTools", b"Bash(git *)", b"Read",
            b"--disallowedTools", b"Bash(rm *)", b"--effort", b"low"] == argv[argv.index(b"--tools"):][:10]
    mock_api.release("limited")
    assert todos.wait_upserts("limited")[0]["data"]["options"]["effort"] == "low"
    offered = {t["name"] for t in mock_api.message_requests()[-1].body.get("tools", [])}
    assert offered - {"DeferredToolPlaceholder"} == {"Bash", "Read"}, offered  # (claude's stand-in for tool search)
    answer = tools.call("continue", {"name": "limited", "prompt": "limited-2 MOCK:hold=again", "effort": "high"})
    argv = Path(f"/proc/{answer.data['pid']}/cmdline").read_bytes().split(b"\0")
    assert argv[argv.index(b"--effort") + 1] == b"high" and b"Bash(git *)" in argv  # the rest kept
    mock_api.release("again")
    todos.wait_upserts("limited", 2)
    bad = tools.call("start", {**args, "name": "bad", "allowed_tools": ["--dangerous"]})
    assert bad.is_error and "allowed_tools: each entry must be" in bad.text
    with pytest.raises(ToolArgumentsError, match="effort: must be one of"):
        tools.call("start", {**args, "name": "bad", "effort": "huge"})



def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "hive-subagent"), *args], env=env, capture_output=True, text=True, timeout=60)


def test_a_real_daemon_restart_keeps_the_worktree_session(daemon_factory, claude_bin, real_env, prompt_file,
                                                          tmp_path, sink):
    """The daemon as a process, driven by the hive-subagent CLI: a worktree session, SIGTERM, a new daemon, and
    continue runs in the worktree; list, status and diff show where it works."""
    workdir, state = tmp_path / "work", tmp_path / "state"
    repo = make_repo(workdir / "repo")
    argv = [str(BIN / "hive-subagent-daemon"), "--claude-bin", claude_bin, "--workdir", str(workdir),
            "--state-dir", str(state), "--agent-socket", str(sink), "--kill-grace", "2"]
    daemon = daemon_factory(argv, env=real_env)
    env = {**real_env, "HIVE_SUBAGENT_URL": daemon.url, "HIVE_SUBAGENT_STATE_DIR": str(state)}
    write = tool("Bash", command="printf 'new\\n' > made.txt && pwd")
    started = run_cli("start", "tree", str(prompt_file), "--cwd", str(repo), "--worktree", "--effort", "low",
                      "--trigger", f"tree-1\n{write}", "--json", env=env)
    assert started.returncode == 0, started.stderr
    tree = state / "worktrees" / "tree"
    assert json.loads(started.stdout)["worktree"]["path"] == str(tree)

    def ended(turn: int):
        return next((t for t in sink_todos(sink, strict=False)
                     if t["key"] == "tree" and f"turn {turn} completed" in t["summary"]), None)

    todo = wait_until(lambda: ended(1), 60, "turn 1's todo", interval=0.2)
    assert f"worktree: {tree} (branch hive/tree" in todo["body"]
    assert "files changed: 1, +1 -0 (made.txt +1 -0)" in todo["body"]
    assert daemon.stop(signal.SIGTERM, timeout=30) == 0

    again = daemon_factory(argv, env=real_env)
    env["HIVE_SUBAGENT_URL"] = again.url
    resumed = run_cli("continue", "tree", "tree-2 " + tool("Bash", command="pwd > where.txt"), env=env)
    assert resumed.returncode == 0, resumed.stderr
    wait_until(lambda: ended(2), 60, "turn 2's todo", interval=0.2)
    assert (tree / "where.txt").read_text() == f"{tree}\n" and not (repo / "where.txt").exists()
    shown = run_cli("status", env=env)
    assert f"cwd={tree}" in shown.stdout and "branch=hive/tree" in shown.stdout, shown.stdout
    assert json.loads(run_cli("status", "tree", "--json", env=env).stdout)["options"] == {"effort": "low"}
    listed = run_cli("list", env=env)
    assert "name=tree" in listed.stdout and f"cwd={tree}" in listed.stdout, listed.stdout
    diff = run_cli("diff", "tree", env=env)
    assert diff.returncode == 0 and "+new" in diff.stdout and "where.txt" in diff.stdout, diff.stdout
