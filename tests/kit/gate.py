"""A gate file instead of a `sleep` window in a task's command: the task waits for the file, and the test opens
it once it has seen what it needs (the running todo, a queued task), so nothing depends on how fast the
machine is that moment."""

from __future__ import annotations

import shlex
import uuid
from pathlib import Path


class Gate:
    def __init__(self, folder: Path):
        self.path = Path(folder) / f"gate-{uuid.uuid4().hex[:8]}"

    @property
    def wait(self) -> str:
        """Shell that returns once the gate is open (a poll of the file every 10 ms)."""
        return f"while [ ! -e {shlex.quote(str(self.path))} ]; do sleep 0.01; done"

    def open(self) -> None:
        self.path.touch()
