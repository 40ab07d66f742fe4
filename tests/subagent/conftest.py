"""Fixtures for the subagent daemon's tests: the real claude CLI and its Messages API mock, a fake claude for
fast engine tests, a todo recorder, and engines that are always shut down."""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from common.config import SubagentSettings
from common.waiting import wait_for

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # mock_messages_api, fake_claude

from mock_messages_api import MockMessagesServer, claude_env  # noqa: E402

REPO = HERE.parent.parent
CLAUDE = REPO / ".cache" / "npm" / "node_modules" / ".bin" / "claude"
FAKE_CLAUDE = HERE / "fake_claude.py"


class TodoRecorder:
    """Stands in for common.loose_ends.LooseEnds (same duck type); tests wait on it with deadlines."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self.cond = threading.Condition()

    def upsert(self, key: str, summary: str, body: str, data: dict | None = None) -> bool:
        with self.cond:
            self.events.append(("upsert", key, {"summary": summary, "body": body, "data": data}))
            self.cond.notify_all()
        return True

    def clear(self, key: str) -> bool:
        with self.cond:
            self.events.append(("clear", key, {}))
            self.cond.notify_all()
        return True

    def upserts(self, key: str) -> list[dict[str, Any]]:
        with self.cond:
            return [e[2] for e in self.events if e[0] == "upsert" and e[1] == key]

    def wait_upserts(self, key: str, count: int = 1, seconds: float = 60.0) -> list[dict[str, Any]]:
        with self.cond:
            ok = wait_for(self.cond, lambda: len([e for e in self.events if e[0] == "upsert" and e[1] == key]) >= count, seconds)
        found = self.upserts(key)
        assert ok, f"no {count} todo(s) for {key!r} within {seconds}s; events: {self.events}"
        return found


@pytest.fixture(scope="session")
def claude_bin() -> str:
    """The real claude CLI that scripts/test installs; a clear failure (never a skip) when it is missing."""
    if not os.access(CLAUDE, os.X_OK):
        pytest.fail(f"the claude CLI is missing at {CLAUDE}: run scripts/test (it installs the npm test tools)")
    return str(CLAUDE)


@pytest.fixture(scope="module")
def mock_api():
    """One Messages API mock per test module (each claude run is cheap against it; the server is reused)."""
    server = MockMessagesServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake_claude_bin(tmp_path: Path) -> str:
    """An executable that runs fake_claude.py with this Python (a shebang cannot name the venv portably)."""
    path = tmp_path / "fake-claude"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_CLAUDE}" "$@"\n')
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def prompt_file(tmp_path: Path) -> Path:
    path = tmp_path / "instructions.md"
    path.write_text("You are a test subagent. PROMPT-FILE-MARKER\n")
    return path


@pytest.fixture
def engine_factory(tmp_path: Path):
    """make(claude_bin, env, **settings) -> (engine, todos); every engine is shut down at teardown."""
    from hivesubagent.engine import SubagentEngine

    made = []

    def make(claude_bin: str, env: dict[str, str], **overrides: Any):
        workdir = tmp_path / "work"
        workdir.mkdir(exist_ok=True)
        settings = SubagentSettings(claude_bin=claude_bin, workdir=workdir, state_dir=tmp_path / "state", kill_grace=2.0)
        settings = replace(settings, **overrides)
        todos = TodoRecorder()
        engine = SubagentEngine(settings, todos, base_env=env)
        made.append(engine)
        return engine, todos

    yield make
    for engine in made:
        engine.shutdown()


@pytest.fixture
def fake_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_"))}
    env.update(HOME=str(home), FAKE_CLAUDE_LOG=str(tmp_path / "fake-claude.log"))
    return env


@pytest.fixture
def real_env(tmp_path: Path, mock_api: MockMessagesServer) -> dict[str, str]:
    return claude_env(mock_api.url, tmp_path / "scratch")
