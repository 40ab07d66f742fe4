"""The claude CLI as the tests drive it: the real one (installed by scripts/test) against the mock of
Anthropic's Messages API on loopback (the one fake of the real path: that API cannot run here), and the fake
claude for fast engine tests. The fixtures are registered for every folder by tests/conftest.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.mock_messages_api import MockMessagesServer

REPO = Path(__file__).resolve().parents[2]
CLAUDE = REPO / ".cache" / "npm" / "node_modules" / ".bin" / "claude"
FAKE_CLAUDE = Path(__file__).resolve().parent / "fake_claude.py"


@pytest.fixture(scope="session")
def claude_bin() -> str:
    """The real claude CLI's path; a clear failure (never a skip) when it is missing."""
    if not os.access(CLAUDE, os.X_OK):
        pytest.fail(f"the claude CLI is missing at {CLAUDE}: run scripts/test (it installs the npm test tools)",
                    pytrace=False)
    return str(CLAUDE)


@pytest.fixture(scope="module")
def mock_api() -> Iterator[MockMessagesServer]:
    """One Messages API mock per test module (each claude run is cheap against it; the server is reused)."""
    server = MockMessagesServer().start()
    yield server
    server.stop()
