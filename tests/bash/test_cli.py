"""hive-bash-daemon as a real subprocess, driven by the hive-bash operator CLI (click's CliRunner, real HTTP):
exit codes with meaning, --json, tail -f, clean shutdown on SIGTERM and a restart after kill -9."""

import json
import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner
from daemon_harness import sink_todos
from kit.gate import Gate
from kit.hivebash_testkit import marked_processes, wait_until

from common.protocol import client as mcp_client
from hivebash.cli import main

DAEMON = str(Path(sys.executable).parent / "hive-bash-daemon")


@pytest.fixture
def bash_daemon(daemon_factory, tmp_path):
    def start(*extra):
        return daemon_factory([DAEMON, "--state-dir", str(tmp_path / "state"), "--kill-grace", "0.3", *extra])
    return start


def hb(daemon, *args):
    result = CliRunner().invoke(main, ["--url", daemon.url, *args], catch_exceptions=False)
    return result.exit_code, result.output


def _with_gate_opened_mid_wait(gate, command):
    """`command()` (an hb call that waits), with `gate` opened at its first progress notification: the wait is
    under way then. The CLI asks for progress as it does on a terminal (piped, it asks for none)."""
    progressed, real = threading.Event(), mcp_client.call_tool

    def call_tool(*args, **kwargs):
        return real(*args, **{**kwargs, "on_progress": lambda message: progressed.set()})

    with pytest.MonkeyPatch.context() as patch, ThreadPoolExecutor(1) as pool:
        patch.setattr(mcp_client, "call_tool", call_tool)
        answer = pool.submit(command)
        assert progressed.wait(20) or answer.done(), "no progress from the waiting call"
        gate.open()
        return answer.result(30)


@pytest.mark.slow
def test_run_wait_exits_with_the_tasks_code_and_json_is_exact(bash_daemon, tmp_path):
    d = bash_daemon()
    code, out = hb(d, "run", "--wait", "20", "--name", "seven", "echo", "hi;", "exit", "7")
    assert code == 7 and out.startswith("id=seven status=done exit_code=7") and "\nhi\n" in out
    code, out = hb(d, "status", "seven", "--json")
    data = json.loads(out)
    assert code == 0 and data["exit_code"] == 7 and data["cwd"] == str(Path.cwd())
    code, out = hb(d, "run", "--wait", "20", "--cwd", str(tmp_path), "pwd")
    assert code == 0 and f"\n{tmp_path}\n" in out
    code, out = hb(d, "run", "--wait", "20", "--timeout", "1", "sleep 30")
    assert code == 124 and "status=timed_out" in out


@pytest.mark.slow
def test_background_run_tail_follow_list_and_kill(bash_daemon):
    d = bash_daemon()
    code, out = hb(d, "run", "--name", "ticks",
                   "for i in 1 2 3; do echo tick $i; echo e$i >&2; sleep 0.2; done; exit 3")
    assert code == 0 and out.startswith("task started: id=ticks")
    code, out = hb(d, "tail", "-f", "ticks")
    assert code == 3 and out == "tick 1\ntick 2\ntick 3\n"
    code, out = hb(d, "tail", "--stderr", "ticks")
    assert code == 0 and out == "e1\ne2\ne3\n"
    hb(d, "run", "--name", "sleeper", "sleep 300")
    code, out = hb(d, "list")
    assert code == 0 and out.splitlines()[0] == "tasks=2 shown=2" and out.splitlines()[2].startswith("sleeper ")
    code, out = hb(d, "list", "--json", "--state", "done")
    assert [t["id"] for t in json.loads(out)["tasks"]] == ["ticks"]
    code, out = hb(d, "kill", "--force", "sleeper")
    assert code == 0 and "action=signalled" in out
    code, out = hb(d, "status", "--wait", "10", "sleeper")
    assert "status=killed" in out and "signal=SIGKILL" in out


@pytest.mark.slow
def test_refusals_and_unreachable_daemon_have_their_own_exit_codes(bash_daemon):
    d = bash_daemon()
    code, out = hb(d, "status", "nope")
    assert code == 1 and "no task 'nope'" in out
    code, out = hb(d, "run", "--name", "Bad!", "true")
    assert code == 1 and "name" in out
    result = CliRunner().invoke(main, ["--url", "http://127.0.0.1:1/mcp", "list"])
    assert result.exit_code == 3 and "cannot reach" in result.output


@pytest.mark.slow
def test_sigterm_stops_tasks_records_them_interrupted_and_restart_after_kill_9(bash_daemon, tmp_path):
    d = bash_daemon()
    hb(d, "run", "--name", "tree", "echo out; sleep 300 & setsid sleep 301 & wait")
    record = tmp_path / "state" / "bash-tasks" / "tree.json"
    marker = json.loads(record.read_text())["marker"]
    assert wait_until(lambda: len(marked_processes(marker)) >= 3)
    assert d.stop(signal.SIGTERM) == 0
    assert json.loads(record.read_text())["state"] == "interrupted"
    assert marked_processes(marker) == []  # nothing it started outlives it

    d2 = bash_daemon()
    hb(d2, "run", "--name", "orphaned", "echo kept; sleep 300 & setsid sleep 301 & wait")
    marker2 = json.loads((tmp_path / "state" / "bash-tasks" / "orphaned.json").read_text())["marker"]
    assert wait_until(lambda: len(marked_processes(marker2)) >= 3)
    d2.stop(signal.SIGKILL)
    d3 = bash_daemon()
    code, out = hb(d3, "status", "orphaned")
    assert "status=interrupted" in out and "\nkept\n" in out
    assert wait_until(lambda: marked_processes(marker2) == [], timeout=5)
    code, out = hb(d3, "status", "tree")
    assert "status=interrupted" in out and "\nout\n" in out


@pytest.mark.slow
def test_leftover_of_a_finished_task_is_reaped_when_it_dies(bash_daemon):
    import psutil

    d = bash_daemon()
    code, out = hb(d, "run", "--wait", "20", "--json", "--name", "bg", "setsid sleep 300 & echo started")
    assert json.loads(out)["status"] == "done" and len(json.loads(out)["leftover_pids"]) == 1  # named in the answer
    data = json.loads(hb(d, "status", "--json", "bg")[1])
    pid = data["leftover_pids"][0]
    assert psutil.Process(pid).ppid() == d.proc.pid  # re-parented to the daemon, a subreaper
    os.kill(pid, signal.SIGKILL)  # it dies now, not at a time the machine's load decides

    def gone_for_good():
        try:
            return psutil.Process(pid).ppid() != d.proc.pid or psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    assert wait_until(lambda: not psutil.pid_exists(pid) or gone_for_good(), timeout=10)
    assert wait_until(lambda: not psutil.pid_exists(pid), timeout=10)  # the zombie was reaped, not left behind


@pytest.mark.slow
def test_official_python_client_sees_five_tools_and_text_results(bash_daemon):
    """What the model gets through a real MCP client: text first lines, no structuredContent by default."""
    import anyio
    from mcp.client.client import Client

    async def session(url):
        async with Client(url, mode="legacy") as client:
            tools = await client.list_tools()
            done = await client.call_tool("run", {"cmd": "echo via-sdk", "wait_seconds": 20, "name": "sdk"})
            bad = await client.call_tool("run", {"cmd": "true", "timeout_secs": -1})
            listed = await client.call_tool("list", {})
            return tools, done, bad, listed

    tools, done, bad, listed = anyio.run(session, bash_daemon().url)
    assert [t.name for t in tools.tools] == ["run", "status", "send", "kill", "list"]
    assert done.is_error is False and done.structured_content is None
    assert done.content[0].text.startswith("id=sdk status=done exit_code=0") and "\nvia-sdk\n" in done.content[0].text
    assert bad.is_error is True and "timeout_secs: must be >= 1" in bad.content[0].text
    assert listed.content[0].text.startswith("tasks=1 shown=1")


@pytest.mark.slow
def test_operator_views_and_wait_never_clear_the_agents_todo(bash_daemon, sink, tmp_path):
    d = bash_daemon("--agent-socket", str(sink))
    hb(d, "run", "--name", "logs", "seq 1 3000; echo 'E: failed at 1500' >&2")
    assert wait_until(lambda: any(t["key"] == "logs" and "status=done" in t["summary"]
                                  for t in sink_todos(sink, strict=False)))
    code, out = hb(d, "status", "logs", "--grep", "^150[0-9]$", "--context", "1")
    assert code == 0 and "stdout:1500: 1500" in out and "stdout:1499- 1499" in out
    code, out = hb(d, "status", "logs", "--from-line", "2999", "--max-lines", "5", "--stream", "stdout")
    assert code == 0 and "2999: 2999\n3000: 3000\n" in out
    code, out = hb(d, "status", "logs", "--new-only", "--stream", "stderr")
    assert code == 0 and "E: failed at 1500" in out
    assert hb(d, "tail", "logs")[0] == 0 and hb(d, "list")[0] == 0
    hb(d, "run", "--name", "slow", "sleep 300")
    gate = Gate(tmp_path)  # quick ends once the wait is under way
    hb(d, "run", "--name", "quick", f"{gate.wait}; exit 5")
    code, out = _with_gate_opened_mid_wait(gate, lambda: hb(d, "wait", "slow", "quick", "--timeout", "20"))
    assert code == 5 and out.splitlines()[1].startswith("id=quick status=done exit_code=5")
    assert "ended during this call: quick" in out
    hb(d, "kill", "--force", "slow")
    todos = {t["key"]: t for t in sink_todos(sink)}
    assert "status=done" in todos["logs"]["summary"] and "status=done" in todos["quick"]["summary"]
