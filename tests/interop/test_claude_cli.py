"""The real Claude Code CLI (2.1.328) against our transport: `claude mcp add` / `claude mcp list`, and a
real `claude -p` turn whose model (a mock Messages API on loopback) calls our tools over MCP.

`claude mcp list` exits 0 whether or not a server connected (docs/design.md, "MCP clients"), so the tests read its text.
Scratch HOME and project directory per test; no API key in the environment (with a key and no base URL the
command hangs ~18 s), and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 so nothing leaves the machine.
"""

import json
import os
import subprocess
import sys

import pytest
from daemon_harness import ECHO_SERVER
from kit.mock_messages_api import claude_env

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
        assert proc.returncode == 0, (
            f"claude {' '.join(args)} failed (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
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
    assert line == f"echo: {echo_daemon.url} (HTTP) - ✔ Connected", (
        f"{listing}\n--- daemon log:\n{echo_daemon.log()[-2000:]}")
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


# -- a real turn: the model asks for our tool, Claude Code calls it over MCP, the model reads the result ---------

@pytest.fixture
def claude_turn(claude_bin, mock_api, echo_daemon, tmp_path):
    """turn(prompt) -> (result object, the tool_result block claude sent back to the model)."""
    server = mock_api
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"echo": {"type": "http", "url": echo_daemon.url}}}))
    env = claude_env(server.url, tmp_path / "scratch")
    env["ENABLE_TOOL_SEARCH"] = "false"  # MCP tools go straight into the request's `tools` (docs/design.md)
    project = tmp_path / "project"
    project.mkdir()

    def turn(prompt):
        seen = len(server.message_requests())
        proc = subprocess.run([str(claude_bin), "-p", "--strict-mcp-config", "--mcp-config", str(config),
                               "--dangerously-skip-permissions", "--output-format", "json", prompt],
                              cwd=project, env=env, capture_output=True, text=True, timeout=90,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, (
            f"claude -p failed (rc {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        requests = server.message_requests()[seen:]
        results = [b for r in requests for m in r.body.get("messages", []) if isinstance(m.get("content"), list)
                   for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
        assert requests and results, f"claude never sent a tool result back to the model:\n{proc.stdout[-2000:]}"
        turn.tools = {t["name"]: t for t in requests[0].body.get("tools", [])}
        return json.loads(proc.stdout), results[-1]

    return turn


def _text(block) -> str:
    content = block.get("content")
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content or [])


def test_claude_calls_our_tool_and_the_model_reads_text(claude_turn):
    result, tool_result = claude_turn('MOCK:tool=mcp__echo__echo {"text": "hi", "times": 2}')
    assert result["is_error"] is False and result["result"] == "tool said: echo=hihi"
    assert _text(tool_result) == "echo=hihi" and not tool_result.get("is_error")
    schema = claude_turn.tools["mcp__echo__echo"]["input_schema"]
    assert schema["required"] == ["text"] and schema["properties"]["times"]["maximum"] == 5


@pytest.mark.parametrize("prompt,expected", [
    ("MOCK:tool=mcp__echo__refuse {}", "refuse: this tool always refuses (expected failure)"),
    ('MOCK:tool=mcp__echo__echo {"text": 7}', "invalid arguments for echo: text: must be of type string"),
    ("MOCK:tool=mcp__echo__crash {}", "internal error in tool 'crash': RuntimeError: boom"),
], ids=["expected-failure", "bad-arguments", "handler-crash"])
def test_claude_shows_the_model_our_tool_errors(claude_turn, prompt, expected):
    """isError results reach the model as an error tool_result carrying our text, and the turn goes on."""
    result, tool_result = claude_turn(prompt)
    assert expected in _text(tool_result)
    assert tool_result.get("is_error") is True
    assert result["is_error"] is False and result["result"].startswith("tool said:")
