"""Fixtures for the robustness tests: our own echo daemons (so their logs can be checked for server errors
without other areas' traffic in them), one of them behind a bearer token."""

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from daemon_harness import ECHO_SERVER, start_daemon
from kit.daemons_kit import BashDaemon, Sink, task_processes
from kit.robust_kit import TOKEN, post_json


def _assert_no_server_error_logged(log: str) -> None:
    # McpApp logs "unexpected error serving ..." for anything that escaped a handler (and answers 500).
    assert "unexpected error serving" not in log, log[-4000:]


@pytest.fixture(scope="session")
def robust_echo(tmp_path_factory):
    """The transport with the test-only echo tools, ours alone; its log is checked at teardown."""
    d = start_daemon([sys.executable, str(ECHO_SERVER)], tmp_path_factory.mktemp("robust-echo"))
    yield d
    assert d.proc.poll() is None, f"the echo daemon died:\n{d.log()[-3000:]}"
    d.stop()
    _assert_no_server_error_logged(d.log())


@pytest.fixture(scope="session")
def token_echo(tmp_path_factory):
    """The echo daemon with a bearer token and one extra allowed host and origin."""
    work = tmp_path_factory.mktemp("token-echo")
    token_file = work / "token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    os.chmod(token_file, 0o600)
    d = start_daemon([sys.executable, str(ECHO_SERVER), "--token-file", str(token_file),
                      "--allowed-hosts", "mcp.internal.example", "--allowed-origins", "https://app.example"], work)
    yield d
    d.stop()
    _assert_no_server_error_logged(d.log())


@pytest.fixture(scope="session")
def handshake_session(robust_echo):
    """A live handshake-era session (2025-03-26, the revision with batches) on the robust echo daemon."""
    resp = post_json(robust_echo.url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}})
    assert resp.status == 200, resp.text()
    return resp.headers["mcp-session-id"]


@pytest.fixture
def short_dir():
    """A directory under /tmp whose paths stay well below the 108-byte Unix socket limit."""
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="rb-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def sink_factory(short_dir):
    """start() -> Sink on <short_dir>/agent.sock (the real `hive-todos serve`); stopped at teardown."""
    started: list[Sink] = []

    def start() -> Sink:
        sink = Sink(short_dir / "agent.sock", short_dir)
        started.append(sink)
        return sink

    yield start
    for sink in started:
        sink.stop()


def _markers(state_dir: Path) -> set[str]:
    """The process markers of every task recorded in a state directory."""
    markers = set()
    for record in (state_dir / "bash-tasks").glob("*.json") if (state_dir / "bash-tasks").is_dir() else ():
        try:
            markers.add(json.loads(record.read_text())["marker"])
        except (OSError, ValueError, KeyError):
            pass
    return markers


@pytest.fixture
def bash_factory(tmp_path, short_dir):
    """start(*extra_args, socket=True, state_dir=None) -> a running BashDaemon; every one is stopped at teardown
    and no process of any of its tasks may outlive that."""
    made: list[BashDaemon] = []

    def start(*extra: str, socket: bool = True, state_dir: Path | None = None) -> BashDaemon:
        d = BashDaemon(tmp_path, state_dir or tmp_path / "state",
                       short_dir / "agent.sock" if socket else None, list(extra))
        made.append(d)
        return d.start()

    yield start
    for d in made:
        if d.daemon is not None and d.alive():
            d.stop()
    leftovers = task_processes({m for d in made for m in _markers(d.state_dir)}) if made else []
    for proc in leftovers:
        proc.kill()
    assert not leftovers, f"task processes outlived their daemon: {[p.pid for p in leftovers]}"
