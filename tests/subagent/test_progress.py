"""A subagent `status` wait streams the turn's progress to a client that asked (the official Python SDK
client's progress_callback), against the real daemon, the real claude CLI and the Messages API mock; a
cancel of that wait ends it at once while the turn runs on."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client

pytestmark = pytest.mark.interop

BIN = Path(sys.executable).parent
HELD = '{key}-1 MOCK:hold={key}\nMOCK:tool=Bash {{"command": "echo progress-marker"}}'


@pytest.fixture
def subagent_daemon(daemon_factory, claude_bin, real_env, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    return daemon_factory([str(BIN / "hive-subagent-daemon"), "--claude-bin", claude_bin, "--workdir", str(workdir),
                           "--state-dir", str(tmp_path / "state"), "--max-inline-waits", "1"], env=real_env)


async def _watch_then_cancel(url: str, prompt_file: str, mode: str, key: str):
    seen: list[str] = []
    told = anyio.Event()

    async def on_progress(progress, total, message):
        seen.append(message)
        if "Bash" in message:
            told.set()

    async with Client(url, mode=mode) as client:
        await client.call_tool("start", {"name": "prog", "prompt_file": prompt_file, "trigger": HELD.format(key=key)})
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: client.call_tool("status", {"name": "prog", "wait_seconds": 30},
                                                      progress_callback=on_progress))
            with anyio.fail_after(60):
                await told.wait()
            group.cancel_scope.cancel()
        cancelled = time.monotonic()
        # One wait slot: a later wait waits (is not `busy`) once the cancelled one gave its slot back. The
        # server learns of the cancel a moment after the client sent it (a hang-up seen by the serving loop),
        # so the later wait may be tried a few times; a slot kept to the window's end (30 s) fails here.
        while True:
            again = (await client.call_tool("status", {"name": "prog", "wait_seconds": 0.2})).content[0].text
            if "busy" not in again or time.monotonic() - cancelled > 5:
                return seen, again, time.monotonic() - cancelled


@pytest.mark.parametrize("mode,key", [("2026-07-28", "progmodern"), ("legacy", "proglegacy")])
def test_a_status_wait_streams_the_turns_progress_and_a_cancel_ends_it(subagent_daemon, prompt_file,
                                                                       mock_api, mode, key):
    try:
        seen, again, took = anyio.run(_watch_then_cancel, subagent_daemon.url, str(prompt_file), mode, key)
    finally:
        mock_api.release(key)
    assert any("prog: " in m and "step" in m and "Bash" in m for m in seen), seen
    assert all(len(m) < 200 for m in seen), seen
    assert "busy" not in again and "prog" in again, again
    assert took < 10, f"the second wait took {took:.1f}s"
