"""The real interactive Claude Code (its TUI) in tmux, against the mock Messages API on loopback.

Why tmux: `claude -p` and `claude mcp list` never declare the MCP tasks extension; only the interactive session,
on a terminal, does (and renders progress, the task list, TaskStop). tmux gives it a real terminal that a test
types into (`send-keys`) and reads (`capture-pane`). Each session gets its own tmux server on its own socket
(nothing shared with a tmux the user runs), a scratch HOME that has done the onboarding, approved the mock's API
key, trusted the project folder and allows the MCP tools the test names, so no dialog stands in the way.

Waits are on conditions with deadlines: the pane holding a text, or the mock having seen a request (the mock
notifies; the pane is another process's screen, so it is polled every 50 ms until the deadline).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from kit.mock_messages_api import LoggedRequest, MockMessagesServer, claude_env

# Claude Code's prompt box is ready for keys once its footer shows the permission mode line.
READY = "shift+tab to cycle"


def tmux_bin() -> str:
    """tmux's path; a clear failure (never a skip) when it is missing (scripts/test installs it)."""
    found = shutil.which("tmux")
    if not found:
        pytest.fail("tmux is missing: run scripts/test (it installs Debian's tmux) or apt-get install -y tmux",
                    pytrace=False)
    return found


def write_home(home: Path, project: Path, api_key: str, allow: list[str]) -> None:
    """A HOME whose Claude Code asks nothing at start: onboarding done, the key approved, the project trusted,
    the tools in `allow` (e.g. "mcp__bash") permitted without a prompt."""
    state = {
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": [api_key], "rejected": []},
        "bypassPermissionsModeAccepted": True,
        "projects": {str(project): {"hasTrustDialogAccepted": True}},
    }
    (home / ".claude.json").write_text(json.dumps(state))
    (home / ".claude").mkdir(exist_ok=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"allow": allow}}))


class ClaudeTUI:
    """One interactive `claude` in its own tmux server; `type(text)` sends a prompt, `wait_pane(text)` waits on
    the screen. `stop()` ends it and makes sure no claude process of it is left."""

    def __init__(self, claude_bin: str, env: dict[str, str], project: Path, args: list[str],
                 size: tuple[int, int] = (200, 50)) -> None:
        self.tmux = tmux_bin()
        # A Unix socket path holds at most 107 bytes: pytest's tmp_path can be longer, /tmp is short.
        self.dir = Path(tempfile.mkdtemp(prefix="tui-", dir="/tmp"))
        self.socket = self.dir / "tmux.sock"
        self.env = env
        self.started = time.monotonic()
        # -f /dev/null: no user tmux.conf; the pane runs claude directly (argv, no shell) in the project folder.
        self._tmux("-f", "/dev/null", "new-session", "-d", "-s", "claude", "-x", str(size[0]), "-y", str(size[1]),
                   "-c", str(project), claude_bin, *args)
        self._tmux("set-option", "-t", "claude", "remain-on-exit", "on")  # a crash stays readable in the pane
        self._tmux("set-option", "-g", "focus-events", "on")  # else claude shows a hint about it in its footer
        self.pid = int(self._tmux("display-message", "-p", "-t", "claude", "#{pane_pid}").strip())

    def _tmux(self, *args: str) -> str:
        done = subprocess.run([self.tmux, "-S", str(self.socket), *args], env=self.env, capture_output=True,
                              text=True, timeout=10, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args[:3])} failed (rc {done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def pane(self) -> str:
        """The screen as text, wrapped lines joined."""
        return self._tmux("capture-pane", "-p", "-J", "-t", "claude")

    def wait_pane(self, wanted: str | Callable[[str], Any], timeout: float = 30.0, what: str = "") -> Any:
        """Wait until the screen holds `wanted` (or `wanted(screen)` is truthy); fail showing the screen."""
        check = wanted if callable(wanted) else (lambda screen: wanted in screen)
        deadline = time.monotonic() + timeout
        while True:
            screen = self.pane()
            value = check(screen)
            if value:
                return value
            if not psutil.pid_exists(self.pid) or time.monotonic() > deadline:
                state = "claude exited" if not psutil.pid_exists(self.pid) else f"timed out after {timeout}s"
                raise AssertionError(f"{state} waiting for {what or repr(wanted)}; the screen:\n{screen}")
            time.sleep(0.05)

    def wait_ready(self, timeout: float = 60.0) -> float:
        """Wait for the prompt box; the seconds claude took to get there."""
        self.wait_pane(READY, timeout, "claude's prompt box")
        return time.monotonic() - self.started

    def type(self, text: str) -> None:
        """Type `text` into the prompt box as keys (literally) and submit it with Enter.

        Enter is sent once the box shows the text, and again if the box still holds it 3 s later: keys that
        arrive together read as a paste, in which an Enter is a new line, not a submit."""
        self._tmux("send-keys", "-t", "claude", "-l", text)
        tail = _squeezed(text[-40:])
        self.wait_pane(lambda screen: tail in input_box(screen), 10, "the typed prompt in the input box")
        for attempt in range(3):
            self._tmux("send-keys", "-t", "claude", "Enter")
            try:
                self.wait_pane(lambda screen: tail not in input_box(screen), 3, "the prompt box to empty")
                return
            except AssertionError:
                if attempt == 2:
                    raise

    def keys(self, *names: str) -> None:
        """Press named keys (tmux names: Escape, Down, C-c, ...)."""
        self._tmux("send-keys", "-t", "claude", *names)

    def processes(self) -> list[psutil.Process]:
        """claude and every process under it now."""
        try:
            top = psutil.Process(self.pid)
            return [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> None:
        """End claude as a closed terminal does (SIGHUP; SIGKILL to what still runs after 3 s) and its tmux
        server; fail if a process of it still runs."""
        left = self.processes()
        for proc in left:
            _signal(proc, signal.SIGHUP)
        alive = still_running(left, 3)
        for proc in alive:
            _signal(proc, signal.SIGKILL)
        subprocess.run([self.tmux, "-S", str(self.socket), "kill-server"], capture_output=True, timeout=10)
        alive = still_running(alive, 5)
        shutil.rmtree(self.dir, ignore_errors=True)
        assert not alive, f"claude's processes outlived SIGKILL: {alive}"


def still_running(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Those of `procs` that still run once none does or `timeout` s have passed (polled: they are not ours).

    An exited process counts as ended whether or not its parent has reaped it, unlike psutil.wait_procs: the tmux
    server can leave claude a zombie until the server itself exits. Debian's tmux records panes with libutempter,
    which runs its helper with SIGCHLD set to the default action when a pane's terminal closes; claude's SIGCHLD,
    arriving in that window, is dropped, and tmux reaps only on a SIGCHLD."""
    deadline = time.monotonic() + timeout
    while True:
        running = [proc for proc in procs if not _ended(proc)]
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.05)


def input_box(screen: str) -> str:
    """The text in claude's prompt box (the lines between the screen's last two horizontal rules), without white
    space."""
    rules = [i for i, line in enumerate(screen.splitlines()) if line.startswith("─" * 20)]
    if len(rules) < 2:
        return ""
    return _squeezed("".join(screen.splitlines()[rules[-2] + 1:rules[-1]]))


def _squeezed(text: str) -> str:
    """`text` without white space: the box wraps a long prompt at any space, indenting the next line."""
    return "".join(text.split())


def _ended(proc: psutil.Process) -> bool:
    """Gone, or a zombie with no thread left: a main thread that exits alone shows as a zombie while the
    process's other threads still run."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE and proc.num_threads() <= 1
    except psutil.NoSuchProcess:
        return True


def _signal(proc: psutil.Process, sig: int) -> None:
    try:
        proc.send_signal(sig)
    except psutil.NoSuchProcess:
        pass


class TUIStarter:
    """Starts interactive Claude Code sessions wired to MCP servers and the mock; stops them all at the end."""

    def __init__(self, claude_bin: str, mock: MockMessagesServer, root: Path) -> None:
        self.claude_bin, self.mock, self.root = claude_bin, mock, root
        self.sessions: list[ClaudeTUI] = []

    def __call__(self, servers: dict[str, str], allow: list[str] | None = None,
                 extra_env: dict[str, str] | None = None) -> ClaudeTUI:
        """A ready session whose `--mcp-config` names `servers` (name -> URL), allowing `allow` (default: every
        server's tools, "mcp__NAME"); `extra_env` adds to claude's environment."""
        scratch = self.root / f"tui-{len(self.sessions)}"
        env = claude_env(self.mock.url, scratch)
        env.update(ENABLE_TOOL_SEARCH="false", TERM="xterm-256color", **(extra_env or {}))
        project = scratch / "project"
        project.mkdir()
        write_home(Path(env["HOME"]), project, env["ANTHROPIC_API_KEY"],
                   allow if allow is not None else [f"mcp__{name}" for name in servers])
        config = scratch / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {name: {"type": "http", "url": url}
                                                     for name, url in servers.items()}}))
        tui = ClaudeTUI(self.claude_bin, env, project, ["--strict-mcp-config", "--mcp-config", str(config)])
        self.sessions.append(tui)
        tui.wait_ready()
        return tui

    def stop(self) -> None:
        for tui in self.sessions:
            tui.stop()


@pytest.fixture
def claude_tui(claude_bin: str, mock_api: MockMessagesServer, tmp_path: Path) -> Iterator[TUIStarter]:
    """start(servers, allow=None, extra_env=None) -> a ready ClaudeTUI; every session is stopped at teardown."""
    starter = TUIStarter(claude_bin, mock_api, tmp_path)
    yield starter
    starter.stop()


def tool_results(requests: list[LoggedRequest]) -> list[str]:
    """The texts of the tool results claude sent the model in `requests`, each once, in order."""
    texts = [_text(b.get("content")) for r in requests for m in r.body.get("messages", [])
             if isinstance(m.get("content"), list) for b in m["content"]
             if isinstance(b, dict) and b.get("type") == "tool_result"]
    return list(dict.fromkeys(texts))


def backgrounded_call(tui: ClaudeTUI, mock_api: MockMessagesServer, tool: str,
                      call: dict[str, Any]) -> tuple[str, str]:
    """The model calls `tool` ("server/name") with `call` from `tui`; the call must move to the background as the
    MCP task of `call["name"]`. Returns that tool result's text and the messages of the turn Claude Code starts
    when the task ends (its <task-notification>), as JSON text."""
    seen = len(mock_api.message_requests())
    server, name = tool.split("/")
    tui.type(f"MOCK:tool=mcp__{server}__{name} " + json.dumps(call))
    results = mock_api.wait_messages(lambda requests: tool_results(requests[seen:]), 60, f"{name}'s tool result")
    assert f'MCP tool "{tool}" started server-side task {call["name"]}-' in results[0], results
    assert "in the background" in results[0], results
    notice = mock_api.wait_messages(lambda requests: _notified(requests[seen:]), 60, "the task notification")
    return results[0], json.dumps(notice.body["messages"])


def _notified(requests: list[LoggedRequest]) -> LoggedRequest | None:
    """The first request carrying a <task-notification> (a turn Claude Code starts when a task ends), or None."""
    return next((r for r in requests if "<task-notification>" in json.dumps(r.body.get("messages"))), None)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))

