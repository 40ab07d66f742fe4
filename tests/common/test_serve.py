"""serve_daemon: clean stop on SIGTERM/SIGINT, sd_notify readiness, loopback-only without a token, bearer token."""

import os
import signal
import socket
import sys

import pytest
from daemon_harness import ECHO_SERVER, start_daemon

from common.protocol.client import McpClientError, call_tool


@pytest.mark.slow
def test_sigterm_and_sigint_stop_cleanly_with_exit_0(tmp_path):
    for sig in (signal.SIGTERM, signal.SIGINT):
        d = start_daemon([sys.executable, str(ECHO_SERVER)], tmp_path / sig.name)
        assert call_tool(d.url, "echo", {"text": "x"}).text == "echo=x"
        assert d.stop(sig) == 0, d.log()


@pytest.mark.slow
def test_sd_notify_ready_and_stopping(tmp_path):
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(20)
        d = start_daemon([sys.executable, str(ECHO_SERVER)], tmp_path, env={"NOTIFY_SOCKET": path})
        assert sock.recv(100) == b"READY=1"
        d.stop()
        assert sock.recv(100) == b"STOPPING=1"


@pytest.mark.slow
def test_refuses_non_loopback_without_token(tmp_path):
    import subprocess
    proc = subprocess.run([sys.executable, str(ECHO_SERVER), "--host", "0.0.0.0", "--port", "0"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert "token-file" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_bearer_token(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    os.chmod(token_file, 0o600)
    d = start_daemon([sys.executable, str(ECHO_SERVER), "--token-file", str(token_file)], tmp_path)
    try:
        with pytest.raises(McpClientError, match="unauthorized"):
            call_tool(d.url, "echo", {"text": "x"})
        with pytest.raises(McpClientError, match="unauthorized"):
            call_tool(d.url, "echo", {"text": "x"}, token="wrong")
        assert call_tool(d.url, "echo", {"text": "x"}, token="s3cret-token").text == "echo=x"
    finally:
        d.stop()


@pytest.mark.slow
def test_token_file_readable_by_others_is_refused(tmp_path):
    import subprocess
    token_file = tmp_path / "token"
    token_file.write_text("abc")
    os.chmod(token_file, 0o644)
    proc = subprocess.run([sys.executable, str(ECHO_SERVER), "--token-file", str(token_file), "--port", "0"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "chmod 600" in proc.stderr and "Traceback" not in proc.stderr
