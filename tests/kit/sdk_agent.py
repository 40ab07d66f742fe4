"""The agent's side of the traps tests: a real hive-bash-daemon driven by the official Python SDK client (mcp),
one connected client kept open across calls, as in a model's turn. The client lives in one task of its own
event loop, on its own thread (its task groups must be entered and left by the same task); calls reach it
through a queue."""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from daemon_harness import start_daemon
from mcp.client.client import Client

BIN = Path(sys.executable).parent
BOUND = 8 * 1024  # every answer the model reads


class SdkAgent:
    """call(tool, **arguments) -> the answer's text (asserted under BOUND); `error=True` expects a tool error."""

    def __init__(self, url: str, mode: str = "auto"):
        self._requests: queue.Queue = queue.Queue()
        self._ready: Future = Future()
        self.instructions: str | None = None
        self._thread = threading.Thread(target=anyio.run, args=(self._serve, url, mode), daemon=True)
        self._thread.start()
        self._ready.result(30)

    async def _serve(self, url: str, mode: str) -> None:
        try:
            async with Client(url, mode=mode) as client:
                self.instructions = client.instructions
                self._ready.set_result(True)
                while (item := await anyio.to_thread.run_sync(self._requests.get)) is not None:
                    method, args, kwargs, done = item
                    try:
                        done.set_result(await getattr(client, method)(*args, **kwargs))
                    except Exception as exc:  # noqa: BLE001 - handed to the caller's thread
                        done.set_exception(exc)
        except Exception as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def _submit(self, method: str, *args, **kwargs) -> Future:
        done: Future = Future()
        self._requests.put((method, args, kwargs, done))
        return done

    def _ask(self, method: str, *args):
        return self._submit(method, *args).result(120)

    def tools(self) -> dict[str, dict]:
        listing = self._ask("list_tools")
        return {t.name: {"description": t.description, "schema": t.input_schema} for t in listing.tools}

    def call(self, tool: str, error: bool = False, **arguments) -> str:
        return self.text(self._ask("call_tool", tool, arguments), error)

    def call_later(self, tool: str, progressed: threading.Event, **arguments) -> Future:
        """A call sent now and answered later (its result: `text(future.result())`), asking for progress:
        `progressed` is set at its first notification, so the test knows the call's wait is under way. The
        agent's other calls wait for its answer, as they do in one client session."""
        async def on_progress(progress, total, message) -> None:
            progressed.set()

        return self._submit("call_tool", tool, arguments, progress_callback=on_progress)

    @staticmethod
    def text(result: Any, error: bool = False) -> str:
        text = "".join(c.text for c in result.content)
        assert result.is_error is error, text
        assert len(text.encode()) < BOUND, f"{len(text.encode())} bytes: {text[:500]}"
        return text

    def close(self) -> None:
        self._requests.put(None)
        self._thread.join(30)


def bash_daemon_argv(state_dir: Path, *extra: str) -> list[str]:
    return [str(BIN / "hive-bash-daemon"), "--state-dir", str(state_dir), "--kill-grace", "0.3", *extra]


@contextmanager
def socketless_bash_daemon(root: Path) -> Iterator[Any]:
    """A real hive-bash-daemon with its state in root/state (as `.state`) and no harness socket: no todo can
    reach the agent."""
    d = start_daemon(bash_daemon_argv(root / "state"), root)
    d.state = root / "state"
    try:
        yield d
    finally:
        d.stop()
