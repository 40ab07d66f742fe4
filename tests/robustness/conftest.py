"""Fixtures for the robustness tests: our own echo daemons (so their logs can be checked for server errors
without other areas' traffic in them), one of them behind a bearer token."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from daemon_harness import ECHO_SERVER, start_daemon  # noqa: E402
from robust_kit import TOKEN, post_json  # noqa: E402


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
