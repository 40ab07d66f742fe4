"""GET /metrics of a real bash daemon: the text parses with Prometheus' own parser, follows the naming rules,
and its figures move with the calls this test makes (tasks by state, tool calls by outcome and their latency,
inline waits held and refused, todo deliveries, output bytes on disk); it sits behind the same doors as /mcp
(the Host check, the bearer token; another uid: tests/robustness/test_hostile_local.py), and --metrics off
takes it away."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from daemon_harness import wait_until
from kit.daemons_kit import BashDaemon
from kit.robust_kit import call_tool_raw, tool_result
from kit.scrape import get_metrics, scrape
from kit.sink import running_sink


@pytest.fixture
def daemon_on(tmp_path):
    """start(*extra, socket=None) -> a running BashDaemon, stopped at teardown."""
    made: list[BashDaemon] = []

    def start(*extra: str, socket: Path | None = None) -> BashDaemon:
        d = BashDaemon(tmp_path, tmp_path / f"state-{len(made)}", socket, list(extra)).start()
        made.append(d)
        return d

    yield start
    for d in made:
        if d.alive():
            d.stop()


def _outputs_on_disk(state: Path) -> int:
    return sum(p.stat().st_size for p in (state / "bash-tasks").iterdir() if p.suffix in (".out", ".err"))


def test_the_figures_move_with_real_calls(daemon_on):
    with running_sink() as sink:
        d = daemon_on(socket=sink.socket_path)
        first = scrape(d.url)
        assert first.value("hive_bash_tasks", state="running") == 0
        assert first.value("hive_bash_tool_calls_total", tool="run", outcome="ok") == 0
        assert first.value("hive_bash_uptime_seconds") > 0

        done = d.call("run", cmd="printf 12345; printf ab >&2", wait_seconds=10)
        assert done["status"] == "done"
        running = d.call("run", cmd="sleep 60", wait_seconds=0)["id"]
        refused = d.call_result("status", {"id": "no-such-task"})
        assert refused["isError"]
        invalid = d.call_result("run", {"cmd": 5})
        assert invalid["isError"]
        quick = d.call("run", cmd="true", wait_seconds=0)["id"]  # not waited for: its end goes out as a todo

        sink.wait_event(lambda e: e.get("key") == quick, "the quick task's todo at the sink")
        after = wait_until(lambda: (s := scrape(d.url)).value("hive_bash_todo_deliveries_total") >= 1 and s,
                           20, "the todo delivery counted")
        assert after.value("hive_bash_tasks", state="running") == 1
        assert after.value("hive_bash_tasks", state="done") == 2
        assert after.value("hive_bash_tasks", state="pending") == 0
        assert after.value("hive_bash_tool_calls_total", tool="run", outcome="ok") == 3
        assert after.value("hive_bash_tool_calls_total", tool="run", outcome="invalid_arguments") == 1
        assert after.value("hive_bash_tool_calls_total", tool="status", outcome="error") == 1
        assert after.value("hive_bash_tool_call_duration_seconds_count", tool="run") == 4
        assert after.value("hive_bash_tool_call_duration_seconds_bucket", tool="run", le="+Inf") == 4
        assert after.value("hive_bash_tool_call_duration_seconds_sum", tool="run") > 0
        assert after.value("hive_bash_todo_delivery_failures_total") == 0
        assert after.value("hive_bash_output_bytes_on_disk") == _outputs_on_disk(d.state_dir) >= 7
        assert after.value("hive_bash_records_unsaved") == 0
        assert after.value("hive_bash_uptime_seconds") >= first.value("hive_bash_uptime_seconds")

        d.call("kill", id=running, force=True)
        wait_until(lambda: scrape(d.url).value("hive_bash_tasks", state="killed") == 1, 20, "the kill counted")


def test_inline_waits_held_and_refused(daemon_on):
    d = daemon_on("--max-inline-waits", "1")
    task = d.call("run", cmd="sleep 60", wait_seconds=0)["id"]
    holder = threading.Thread(target=lambda: call_tool_raw(d.url, "status", {"id": task, "wait_seconds": 30},
                                                          timeout=90))
    holder.start()
    try:
        wait_until(lambda: scrape(d.url).value("hive_bash_inline_waits_held") == 1, 20, "the first wait held")
        second = d.call("status", id=task, wait_seconds=5)
        assert second["status"] == "running"
        got = scrape(d.url)
        assert got.value("hive_bash_inline_waits_refused_total") == 1
        assert got.value("hive_bash_inline_waits_limit") == 1
        assert got.value("hive_bash_tool_calls_in_flight", tool="status") == 1  # the held wait's call
        assert got.value("hive_bash_tool_call_oldest_in_flight_seconds", tool="status") > 0
        assert got.value("hive_bash_tool_call_oldest_in_flight_seconds", tool="kill") == 0
    finally:
        d.call("kill", id=task, force=True)
        holder.join(60)
    wait_until(lambda: scrape(d.url).value("hive_bash_inline_waits_held") == 0, 20, "the wait released")


def test_the_token_and_the_host_check_guard_metrics_and_off_removes_them(daemon_on, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    token.chmod(0o600)
    d = daemon_on("--token-file", str(token))
    assert get_metrics(d.url).status == 401
    assert get_metrics(d.url, {"Authorization": "Bearer wrong"}).status == 401
    assert scrape(d.url, token="s3cret").value("hive_bash_tasks", state="done") == 0
    assert get_metrics(d.url, {"Host": "evil.example"}).status == 421  # the Host header set twice is refused too
    posted = get_metrics(d.url, {"Authorization": "Bearer s3cret"})
    assert posted.status == 200

    off = daemon_on("--metrics", "off")
    assert get_metrics(off.url).status == 404
    assert tool_result(call_tool_raw(off.url, "list", {}))["isError"] is False
