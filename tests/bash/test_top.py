"""`hive-bash top --once` against a real daemon with real tasks: a frame with a row per running task (its
processes, their memory, its output), the `input` mark on the one task blocked reading its stdin and on no
other, and a call held in an inline wait shown among the calls in flight; --json gives the same figures."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
from daemon_harness import wait_until
from kit.daemons_kit import BIN, BashDaemon
from kit.robust_kit import call_tool_raw
from kit.scrape import scrape

HIVE_BASH = str(BIN / "hive-bash")


@pytest.fixture
def daemon(tmp_path):
    d = BashDaemon(tmp_path, tmp_path / "state", None).start()
    yield d
    d.stop()


def _top(d: BashDaemon, *extra: str) -> str:
    out = subprocess.run([HIVE_BASH, "--url", d.url, "top", "--once", *extra], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_one_frame_shows_the_running_tasks_and_the_calls_in_flight(daemon):
    ticking = daemon.call("run", cmd="while :; do echo tick; sleep 0.05; done", wait_seconds=0)["id"]
    reading = daemon.call("run", cmd="read -r answer; echo got $answer", stdin="pipe", wait_seconds=0)["id"]
    piped = daemon.call("run", cmd="sleep 60 | cat", wait_seconds=0)["id"]  # cat reads a pipe, not the task's stdin
    holder = threading.Thread(target=lambda: call_tool_raw(daemon.url, "status", {"id": piped, "wait_seconds": 30},
                                                           timeout=90))
    holder.start()
    try:
        wait_until(lambda: scrape(daemon.url).value("hive_bash_tool_calls_in_flight", tool="status") == 1, 20,
                   "the held status call in flight")
        wait_until(lambda: daemon.call("status", id=ticking)["stdout"]["size"] > 0, 20, "the ticking task's output")
        frame = json.loads(_top(daemon, "--json"))
        rows = {t["id"]: t for t in frame["tasks"]}
        assert set(rows) == {ticking, reading, piped} and frame["running"] == 3 and frame["pending"] == 0
        assert frame["calls_in_flight"]["calls"] == {"status": 1}
        assert frame["calls_in_flight"]["oldest_seconds"]["status"] > 0
        assert rows[reading]["waiting_for_input"] is True
        assert rows[ticking]["waiting_for_input"] is False and rows[piped]["waiting_for_input"] is False
        assert rows[piped]["processes"] >= 3  # bash, sleep, cat
        assert all(t["memory_bytes"] > 0 and t["pid"] > 0 for t in rows.values())
        assert rows[ticking]["output_bytes"] > 0 and rows[ticking]["output_bytes_per_second"] is not None

        text = _top(daemon)
        lines = text.splitlines()
        assert lines[0].startswith("hive-bash top  ") and "running 3, pending 0" in lines[0]
        assert lines[1].startswith("calls in flight: status x1 (oldest ")
        header = next(line for line in lines if line.startswith("ID "))
        assert header.split() == ["ID", "AGE", "PID", "PROCS", "CPU", "MEM", "OUTPUT", "GROWTH", "WAITS", "COMMAND"]
        by_id = {line.split()[0]: line for line in lines if line.split() and line.split()[0] in rows}
        assert set(by_id) == set(rows)
        assert " input " in by_id[reading] and " input " not in by_id[ticking]
        assert by_id[ticking].rstrip().endswith("while :; do echo tick; sleep 0.05; done")
    finally:
        daemon.call("kill", id=piped, force=True)
        holder.join(60)


def test_a_daemon_with_nothing_running_shows_an_empty_frame(daemon):
    daemon.call("run", cmd="true", wait_seconds=5)
    text = _top(daemon)
    assert "running 0, pending 0" in text and "(no running tasks)" in text and "calls in flight: none" in text
