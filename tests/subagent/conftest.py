"""Fixtures for the subagent daemon's tests: a fake claude for fast engine tests, a todo recorder, and engines
that are always shut down (the real claude CLI and its Messages API mock: tests/kit/claude.py)."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kit.claude import FAKE_CLAUDE
from kit.mock_messages_api import MockMessagesServer, claude_env
from todo_recorder import TodoRecorder

from common.config import SubagentSettings
from hivesubagent.transcripts.sessions import SessionStore


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

    def make(claude_bin: str, env: dict[str, str], ops: Any = None, **overrides: Any):
        workdir = tmp_path / "work"
        workdir.mkdir(exist_ok=True)
        settings = SubagentSettings(claude_bin=claude_bin, workdir=workdir,
                                    state_dir=tmp_path / "state", kill_grace=2.0)
        settings = replace(settings, **overrides)
        todos = TodoRecorder()
        engine = SubagentEngine(settings, todos, base_env=env, ops=ops)
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


@pytest.fixture
def store(tmp_path) -> SessionStore:
    """A session store over an empty working directory and a scratch HOME."""
    work = tmp_path / "work"
    work.mkdir()
    return SessionStore(work, {"HOME": str(tmp_path / "home")})
