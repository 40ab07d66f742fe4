"""`hive-subagent-daemon` as a real process with the real claude CLI, driven by the real `hive-subagent` CLI
and the official Python MCP client; todos reach the reference sink (`hive-todos serve`); SIGTERM stops
the running turns. Plus `list`/`log` straight from transcripts, and the exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import psutil
import pytest
from click.testing import CliRunner
from daemon_harness import sink_todos, wait_until
from mcp.client.client import Client

from hivesubagent.cli import main as cli_main
from hivesubagent.transcripts import where

BIN = Path(sys.executable).parent


def run_cli(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "hive-subagent"), *args], env=env, input=stdin, capture_output=True,
                          text=True, timeout=60)


def wait_todo(sink: Path, daemon, summary_part: str, key: str = "job", seconds: float = 60.0) -> dict:
    """Until the sink holds todo `key` whose summary contains `summary_part` (polled: another process's state;
    each poll is a process start, so not too often). On timeout, the daemon's log says why."""
    def found():
        return next((t for t in sink_todos(sink, strict=False) if t["key"] == key and summary_part in t["summary"]),
                    None)

    try:
        return wait_until(found, seconds, f"a {key!r} todo with {summary_part!r} at the sink", interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\ndaemon log:\n{daemon.log()[-3000:]}") from None


async def _sdk_session(url: str):
    async with Client(url) as client:
        tools = await client.list_tools()
        status = await client.call_tool("status", {})
        bad = await client.call_tool("start", {"name": "x", "prompt_file": "relative.md"})
        return tools, status, bad


@pytest.mark.interop
def test_daemon_end_to_end(daemon_factory, claude_bin, real_env, prompt_file, tmp_path, sink):
    workdir = tmp_path / "work"
    workdir.mkdir()
    daemon = daemon_factory(
        [str(BIN / "hive-subagent-daemon"), "--claude-bin", claude_bin, "--workdir", str(workdir),
         "--state-dir", str(tmp_path / "state"), "--agent-socket", str(sink), "--kill-grace", "2"],
        env=real_env,
    )
    # list and log find the sessions' directory through the record the daemon keeps in its state directory
    env = {**real_env, "HIVE_SUBAGENT_URL": daemon.url, "HIVE_SUBAGENT_STATE_DIR": str(tmp_path / "state")}

    tools, status, bad = anyio.run(_sdk_session, daemon.url)
    assert [t.name for t in tools.tools] == ["start", "continue", "interrupt", "status"]
    assert status.is_error is False and status.content[0].text.startswith("sessions=0 running=0")
    assert bad.is_error and "prompt_file: 'relative.md' must be an absolute path" in bad.content[0].text

    started = run_cli("start", "job", os.path.relpath(prompt_file), "--trigger", "job-1 MOCK:reply=job done",
                      "--max-budget-usd", "5", "--json", env=env)
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["name"] == "job" and json.loads(started.stdout)["max_budget_usd"] == 5
    todo = wait_todo(sink, daemon, "turn 1")
    assert todo["source"] == "subagent" and todo["summary"].startswith("subagent job: turn 1 completed")
    assert "job done" in todo["body"]

    shown = run_cli("status", "job", env=env)
    assert shown.returncode == 0 and shown.stdout.startswith("name=job state=finished running=false")
    paged = run_cli("status", "job", "--result-offset", "4", env=env)
    assert paged.returncode == 0 and paged.stdout.splitlines()[-2:] == ["done", "(end of the result)"]
    long_running = run_cli("continue", "job", "-", env=env, stdin="job-2 MOCK:sleep=60")
    assert long_running.returncode == 0 and long_running.stdout.startswith("state=running name=job")
    refused = run_cli("continue", "job", "more", env=env)
    assert refused.returncode == 1 and "refused: 'job' is running" in refused.stderr
    unknown = run_cli("interrupt", "nobody", "--json", env=env)
    assert unknown.returncode == 1 and "not running" in json.loads(unknown.stdout)["error"]
    pid = json.loads(run_cli("status", "job", "--json", env=env).stdout)["pid"]

    # claude writes the new turn's prompt to the transcript a moment after its init line
    listed = wait_until(lambda: (r := run_cli("list", env=env)).returncode == 0 and "turns=2" in r.stdout and r, 30,
                        "the second turn in the transcript", interval=0.2)  # each poll is a process start
    assert "name=job" in listed.stdout

    # SIGTERM: the running turn is interrupted, its todo delivered, no claude left behind, exit 0
    assert daemon.stop(signal.SIGTERM, timeout=30) == 0
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    todo = wait_todo(sink, daemon, "turn 2")
    assert "interrupted" in todo["summary"] and "daemon shutdown" in todo["body"]

    down = run_cli("status", env=env)
    assert down.returncode == 3 and "cannot reach" in down.stderr
    log = run_cli("log", "job", env=env)
    assert log.returncode == 0 and "=== turn 1" in log.stdout and "> job-1 MOCK:reply=job done" in log.stdout
    assert "job done" in log.stdout and "=== turn 2" in log.stdout

    # a new daemon reattaches to the session on disk: the transcript is the only record
    again = daemon_factory(
        [str(BIN / "hive-subagent-daemon"), "--claude-bin", claude_bin, "--workdir", str(workdir),
         "--state-dir", str(tmp_path / "state"), "--agent-socket", str(sink)],
        env=real_env,
    )
    env["HIVE_SUBAGENT_URL"] = again.url
    before = json.loads(run_cli("status", "job", "--json", env=env).stdout)
    assert before["running"] is False and before["turns"] == 2 and before["last_turn"]["outcome"] == "interrupted"
    resumed = run_cli("continue", "job", "job-3 MOCK:reply=back after restart", env=env)
    assert resumed.returncode == 0, resumed.stderr
    wait_todo(sink, again, "turn 3 completed")
    after = json.loads(run_cli("status", "job", "--json", env=env).stdout)
    assert after["session_id"] == before["session_id"] and after["turns"] == 3
    assert after["last_turn"]["result_text"] == "back after restart"
    # status waits from the command line too: one name, several (with --all), the caps of a turn
    waited = run_cli("status", "job", "--wait", "5", env=env)
    assert waited.returncode == 0 and waited.stdout.rstrip().endswith("not running: nothing to wait for"), waited.stdout
    several = run_cli("status", "job", "job", env=env)
    assert several.returncode == 1 and "names: must not name the same item twice" in several.stderr
    capped = run_cli("continue", "job", "job-4 MOCK:reply=capped", "--max-turns", "3", "--timeout-minutes", "0.5",
                     "--json", env=env)
    assert capped.returncode == 0 and json.loads(capped.stdout)["max_turns"] == 3
    assert json.loads(capped.stdout)["timeout_minutes"] == 0.5
    both = run_cli("status", "job", "other", "--wait", "30", "--all", env=env)
    assert both.returncode == 1 and "names: no session named 'other'" in both.stderr


def test_log_and_list_read_transcripts_without_a_daemon(tmp_path):
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    from hivesubagent.transcripts.sessions import SessionStore

    store = SessionStore(work, {"HOME": str(home)})
    store.project_dir.mkdir(parents=True)
    entries = [
        {"type": "custom-title", "customTitle": "logged"},
        {"type": "user", "message": {"role": "user", "content": "count files"}, "promptSource": "sdk",
         "timestamp": "2026-11-30T10:00:00Z"},
        {"type": "assistant",
         "message": {"id": "a", "model": "m",
                     "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls | wc -l"}}],
                     "stop_reason": "tool_use"}},
        {"type": "user",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}]},
         "toolUseResult": {}},
        {"type": "assistant",
         "message": {"id": "b", "model": "m", "content": [{"type": "text", "text": "There are 42."}],
                     "stop_reason": "end_turn"}},
        {"type": "cost-state", "totalCostUSD": 0.25},
        {"type": "user", "message": {"role": "user", "content": "and again"}, "promptSource": "sdk"},
        {"type": "assistant", "isApiErrorMessage": True,
         "message": {"model": "<synthetic>", "content": [{"type": "text", "text": "API Error: 500"}]}},
    ]
    (store.project_dir / "s1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    runner = CliRunner()
    env = {"HOME": str(home), "HIVE_SUBAGENT_WORKDIR": str(work)}
    result = runner.invoke(cli_main, ["log", "logged"], env=env)
    assert result.exit_code == 0, result.output
    assert ("=== turn 1 (2026-11-30T10:00:00Z) ===\n> count files\n-> Bash({\"command\": \"ls | wc -l\"})\n<- 42\n"
            "There are 42.") in result.output
    assert "=== turn 2 ===\n> and again\n!! error: API Error: 500" in result.output
    data = json.loads(runner.invoke(cli_main, ["log", "logged", "--json", "--last", "1"], env=env).output)
    assert [t["number"] for t in data["turns"]] == [2]
    listed = json.loads(runner.invoke(cli_main, ["list", "--json"], env=env).output)
    assert [(s["name"], s["turns"], s["last_outcome"], s["total_cost_usd"])
            for s in listed["sessions"]] == [("logged", 2, "error", 0.25)]
    state = tmp_path / "state"
    state.mkdir()
    where.write_record(state, work, {"HOME": str(home)})
    found = runner.invoke(cli_main, ["log", "logged", "--last", "1"],
                          env={"HOME": "/nonexistent", "HIVE_SUBAGENT_STATE_DIR": str(state)})
    assert found.exit_code == 0 and "=== turn 2 ===" in found.output, found.output
    absent = runner.invoke(cli_main, ["list", "--state-dir", str(tmp_path)], env={"HOME": str(home)})
    assert absent.exit_code == 0 and "no daemon record in" in absent.output and "sessions=0" in absent.output
    missing = runner.invoke(cli_main, ["log", "nobody"], env=env)
    assert missing.exit_code == 1 and "no session named 'nobody'" in missing.output
    bad = runner.invoke(cli_main, ["log", "Bad!"], env=env)
    assert bad.exit_code == 2 and "[a-z0-9-]{1,63}" in bad.output
    assert runner.invoke(cli_main, ["list", "--extra-env", "nonsense"], env=env).exit_code == 2


@pytest.mark.slow
def test_daemon_refuses_bad_settings(tmp_path):
    env = dict(os.environ)
    missing_bin = subprocess.run([str(BIN / "hive-subagent-daemon"), "--claude-bin", str(tmp_path / "nope"),
                                  "--workdir", str(tmp_path), "--state-dir", str(tmp_path / "s"), "--port", "0"],
                                 env=env, capture_output=True, text=True, timeout=30)
    assert missing_bin.returncode == 1 and "--claude-bin" in missing_bin.stderr
    bad_dir = subprocess.run([str(BIN / "hive-subagent-daemon"), "--workdir", str(tmp_path / "absent"), "--state-dir",
                              str(tmp_path / "s"), "--port", "0"], env=env, capture_output=True, text=True, timeout=30)
    assert bad_dir.returncode == 1 and "workdir" in bad_dir.stderr and "Traceback" not in bad_dir.stderr


@pytest.mark.slow
@pytest.mark.parametrize("flag, value, message", [("--max-running", "0", "at least 1"),
                                                  ("--turn-timeout", "-1", ">= 0"), ("--max-turns", "-1", "x>=0"),
                                                  ("--kill-grace", "-1", ">= 0"),
                                                  ("--log-level", "loud", "is not one of 'debug'")])
def test_daemon_refuses_knobs_that_cannot_work(tmp_path, flag, value, message):
    out = subprocess.run([str(BIN / "hive-subagent-daemon"), "--claude-bin", sys.executable, "--workdir", str(tmp_path),
                          "--state-dir", str(tmp_path / "s"), "--port", "0", flag, value], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 2 and flag in out.stderr and message in out.stderr, out.stderr


@pytest.mark.slow
def test_kill_9_of_the_daemon_mid_turn_then_restart(daemon_factory, claude_bin, real_env, prompt_file, tmp_path, sink):
    """Without systemd's cgroup a kill -9 leaves the running claude behind. The restarted daemon (empty memory, as
    specified) must still refuse a second claude on that session while the first lives (claude itself would let
    both append to one transcript: docs/design.md), and resume it from disk once it has ended."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    argv = [str(BIN / "hive-subagent-daemon"), "--claude-bin", claude_bin, "--workdir", str(workdir),
            "--state-dir", str(tmp_path / "state"), "--agent-socket", str(sink)]
    daemon = daemon_factory(argv, env=real_env)
    env = {**real_env, "HIVE_SUBAGENT_URL": daemon.url}
    started = run_cli("start", "crash", str(prompt_file), "--trigger", "crash-1 MOCK:sleep=60", "--json", env=env)
    assert started.returncode == 0, started.stderr
    pid = json.loads(run_cli("status", "crash", "--json", env=env).stdout)["pid"]
    wait_until(lambda: list((Path(real_env["HOME"]) / ".claude" / "sessions").glob("*.json")), 30,
               "claude to register its live session")
    daemon.stop(signal.SIGKILL)
    orphan = psutil.Process(pid)
    assert orphan.is_running() and orphan.status() != psutil.STATUS_ZOMBIE, "the turn outlives a kill -9 of the daemon"

    daemon = daemon_factory(argv, env=real_env)
    env = {**real_env, "HIVE_SUBAGENT_URL": daemon.url}
    refused = run_cli("continue", "crash", "again", env=env)
    assert refused.returncode == 1 and f"pid {pid}" in refused.stderr, refused.stderr
    orphan.kill()
    orphan.wait(10)
    resumed = run_cli("continue", "crash", "crash-2 MOCK:reply=back again", "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    todo = wait_todo(sink, daemon, "turn 2", key="crash")
    assert "completed" in todo["summary"] and "back again" in todo["body"]
