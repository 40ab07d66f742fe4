"""The real Claude Code CLI (2.1.328) connecting to our transport: `claude mcp add` then `claude mcp list`.

`claude mcp list` exits 0 whether or not a server connected (FACTS.md), so the tests read its text.
Scratch HOME and project directory per test; no API key in the environment (with a key and no base URL the
command hangs ~18 s), and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 so nothing leaves the machine.
"""

import json
import os
import subprocess
import sys

import pytest

from daemon_harness import ECHO_SERVER

pytestmark = pytest.mark.interop

TOKEN = "interop-test-token-0123456789"


@pytest.fixture
def claude(claude_bin, tmp_path):
    """run(*args) -> CompletedProcess of the real CLI in a scratch HOME and project directory."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update(HOME=str(home), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", XDG_CONFIG_HOME=str(home / ".config"),
               XDG_CACHE_HOME=str(home / ".cache"))

    def run(*args):
        proc = subprocess.run([str(claude_bin), *args], cwd=project, env=env, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, f"claude {' '.join(args)} failed (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        return proc

    run.home = home
    return run


def _status_line(listing: str, name: str) -> str:
    lines = [line for line in listing.splitlines() if line.startswith(f"{name}: ")]
    assert len(lines) == 1, f"no single line for {name!r} in `claude mcp list`:\n{listing}"
    return lines[0]


def _mcp_log(home, name) -> list[dict]:
    """Claude Code's own per-server connection log (debug lines as JSON), to see which protocol era it chose."""
    entries = []
    for path in (home / ".cache").glob(f"**/mcp-logs-{name}/*.jsonl"):
        entries += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return entries


def test_claude_mcp_list_connects(echo_daemon, claude):
    claude("mcp", "add", "--transport", "http", "echo", echo_daemon.url)
    listing = claude("mcp", "list").stdout
    line = _status_line(listing, "echo")
    assert line == f"echo: {echo_daemon.url} (HTTP) - ✔ Connected", f"{listing}\n--- daemon log:\n{echo_daemon.log()[-2000:]}"
    # Claude Code 2.1.328 tries server/discover (2026-07-28) first; it must not have fallen back to initialize.
    debug = " ".join(e.get("debug", "") for e in _mcp_log(claude.home, "echo"))
    assert '"negotiatedProtocolVersion":"2026-07-28"' in debug, debug[-3000:]


def test_claude_mcp_list_with_bearer_token(daemon_factory, claude, tmp_path):
    """A daemon with --token-file: the client that sends the token connects, the one without is refused."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    daemon = daemon_factory([sys.executable, str(ECHO_SERVER), "--token-file", str(token_file)])
    claude("mcp", "add", "--transport", "http", "with-token", daemon.url, "--header", f"Authorization: Bearer {TOKEN}")
    claude("mcp", "add", "--transport", "http", "without-token", daemon.url)
    listing = claude("mcp", "list").stdout
    assert _status_line(listing, "with-token").endswith("(HTTP) - ✔ Connected"), listing
    assert "✘ Failed to connect" in _status_line(listing, "without-token"), listing
