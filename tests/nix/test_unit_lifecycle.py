"""Each daemon run the way its unit runs it: the unit's own environment, a NOTIFY_SOCKET like systemd's, then
SIGTERM to the daemon alone (KillMode=mixed). It must say READY=1 once it serves, serve the tools the unit and the
module option describe, and on SIGTERM stop its own work and exit 0 within the unit's TimeoutStopSec (past it,
systemd would SIGKILL the cgroup and the work would not be recorded).

systemd cannot run here as PID 1, so the test plays its part: the datagram socket and the signal are the whole
protocol between them (sd_notify(3), systemd.kill(5)).
"""

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from common.protocol.client import call_tool
from daemon_harness import wait_until
from kit.nixtest import BASH_TOOLS, HERE, REPO, SUBAGENT_TOOLS, eval_json

FAKE_CLAUDE = REPO / "tests" / "kit" / "fake_claude.py"
BIN = Path(sys.executable).parent  # the console scripts installed beside this interpreter (the venv)


@pytest.fixture(scope="module")
def services(nix_instantiate):
    return eval_json(nix_instantiate, HERE / "eval-module.nix", libPath="null", extraModules="[ ]")["services"]


@pytest.fixture
def notify(tmp_path):
    """A datagram socket standing in for systemd's notification socket."""
    path = tmp_path / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    yield sock, str(path)
    sock.close()


def wait_for_notification(sock: socket.socket, wanted: str, timeout: float) -> list[str]:
    """Read notifications until one carries `wanted` (e.g. READY=1); every message seen is returned."""
    seen = []
    deadline = time.monotonic() + timeout
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            message = sock.recv(4096).decode()
        except socket.timeout:
            raise AssertionError(f"no {wanted} within {timeout}s; got {seen}") from None
        seen.append(message)
        if wanted in message.split("\n"):
            return seen


def tool_names(url: str) -> list[str]:
    version = "2026-07-28"
    meta = {"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}).encode()
    request = urllib.request.Request(url, body, {
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version, "Mcp-Method": "tools/list"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return [t["name"] for t in json.loads(response.read())["result"]["tools"]]


def unit_env(service: dict, prefix: str, tmp_path: Path, notify_path: str) -> dict:
    env = dict(service["environment"])
    env[f"{prefix}_STATE_DIR"] = str(tmp_path / "state")  # /var/lib/<name> is systemd's to create
    del env[f"{prefix}_PORT"]  # the harness passes --port 0, which beats the variable
    env["NOTIFY_SOCKET"] = notify_path
    return env


def stop_like_systemd(daemon, sock, timeout_stop: float) -> None:
    """SIGTERM to the main process only; it must exit 0 before TimeoutStopSec, having said STOPPING=1."""
    started = time.monotonic()
    daemon.proc.send_signal(signal.SIGTERM)  # once: a second SIGTERM would make the daemon leave at once
    wait_for_notification(sock, "STOPPING=1", timeout_stop)
    try:
        code = daemon.proc.wait(max(0.0, timeout_stop - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running after TimeoutStopSec={timeout_stop}s:\n{daemon.log()[-3000:]}") from None
    assert code == 0, daemon.log()[-3000:]


@pytest.mark.slow
def test_bash_daemon_under_its_unit(services, notify, tmp_path, daemon_factory):
    sock, notify_path = notify
    service = services["hive-bash"]
    daemon = daemon_factory([str(BIN / "hive-bash-daemon")], env=unit_env(service, "HIVE_BASH", tmp_path, notify_path))
    wait_for_notification(sock, "READY=1", 20)
    with urllib.request.urlopen(daemon.base + "/healthz", timeout=10) as response:
        assert json.loads(response.read())["ok"] is True
    assert tool_names(daemon.url) == BASH_TOOLS

    started = call_tool(daemon.url, "run", {"cmd": "sleep 300", "name": "held", "wait_seconds": 0})
    assert not started.is_error, started.text
    record = tmp_path / "state" / "bash-tasks" / "held.json"
    wait_until(lambda: json.loads(record.read_text()).get("state") == "running", 20, "the task to run")
    sleepers = [p for p in psutil.Process(daemon.proc.pid).children(recursive=True)]
    assert sleepers, "the task's processes"

    stop_like_systemd(daemon, sock, service["serviceConfig"]["TimeoutStopSec"])
    assert json.loads(record.read_text())["state"] == "interrupted"
    # Nothing the task started outlives the daemon, even before systemd's final SIGKILL of the cgroup.
    assert not [p for p in sleepers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
def test_subagent_daemon_under_its_unit(services, notify, tmp_path, daemon_factory):
    sock, notify_path = notify
    service = services["hive-subagent"]
    fake = tmp_path / "fake-claude"
    fake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_CLAUDE}" "$@"\n')
    fake.chmod(0o755)
    env = unit_env(service, "HIVE_SUBAGENT", tmp_path, notify_path)
    env["HIVE_SUBAGENT_CLAUDE_BIN"] = str(fake)
    env["HIVE_SUBAGENT_WORKDIR"] = str(tmp_path)
    (tmp_path / "home").mkdir()
    env["HOME"] = str(tmp_path / "home")
    daemon = daemon_factory([str(BIN / "hive-subagent-daemon")], env=env)
    wait_for_notification(sock, "READY=1", 20)
    assert tool_names(daemon.url) == SUBAGENT_TOOLS

    # A turn that ignores SIGINT: the stop must go all the way to SIGKILL after the kill grace, and still fit
    # in TimeoutStopSec.
    instructions = tmp_path / "instructions.md"
    instructions.write_text("Test subagent.\n")
    started = call_tool(daemon.url, "start", {"name": "stubborn", "prompt_file": str(instructions),
                                              "trigger": "FAKE:ignore-int FAKE:sleep=300"})
    assert not started.is_error, started.text
    turn = wait_until(lambda: psutil.Process(daemon.proc.pid).children(recursive=True), 20, "claude to run")

    stop_like_systemd(daemon, sock, service["serviceConfig"]["TimeoutStopSec"])
    assert not [p for p in turn if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
