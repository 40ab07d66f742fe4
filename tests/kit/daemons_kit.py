"""Real daemons for the fault, fuzz and load tests: `hive-bash-daemon` with the real `hive-todos serve`
sink on a Unix socket, and helpers to call tools and look at what is left on disk and in the process table.
"""

import json
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from daemon_harness import DaemonProcess, start_daemon

from kit.robust_kit import call_tool_raw, result_text, tool_result
from kit.sink import Sink  # noqa: F401 - the robustness tests take the one sink from here

BIN = Path(sys.executable).parent
# Far above the 30 s inline-wait cap: a slow answer on a loaded box is not a hang, and must not race the wait.
CALL_TIMEOUT = 90.0
BASH_DAEMON = BIN / "hive-bash-daemon"
MARKER_ENV = "HIVE_BASH_TASK"  # hivebash.processes.search.MARKER_ENV: every process of a task carries it



@dataclass
class BashDaemon:
    """One `hive-bash-daemon` on a state directory; `restart` keeps the directory and the socket."""

    workdir: Path
    state_dir: Path
    socket_path: Path | None
    extra: list[str] = field(default_factory=list)
    daemon: DaemonProcess | None = None

    def start(self) -> "BashDaemon":
        argv = [str(BASH_DAEMON), "--state-dir", str(self.state_dir), *self.extra]
        if self.socket_path is not None:
            argv += ["--agent-socket", str(self.socket_path)]
        self.daemon = start_daemon(argv, self.workdir)
        return self

    @property
    def url(self) -> str:
        return self.daemon.url

    @property
    def pid(self) -> int:
        return self.daemon.proc.pid

    def alive(self) -> bool:
        return self.daemon.proc.poll() is None

    def call(self, tool: str, **arguments: Any) -> dict:
        """A tool call that must succeed: its structured data."""
        result = tool_result(call_tool_raw(self.url, tool, arguments, timeout=CALL_TIMEOUT))
        assert not result["isError"], f"{tool}({arguments}) failed: {result_text(result)}"
        return result["structuredContent"]

    def call_result(self, tool: str, arguments: Any) -> dict:
        """Any tool call: the MCP result (isError, content, structuredContent)."""
        return tool_result(call_tool_raw(self.url, tool, arguments, timeout=CALL_TIMEOUT))

    def tasks(self, state: str | None = None) -> list[dict]:
        args: dict[str, Any] = {"limit": 1000}
        if state:
            args["state"] = state
        return self.call("list", **args)["tasks"]

    def kill9(self) -> None:
        self.daemon.proc.kill()
        self.daemon.proc.wait(15)

    def stop(self) -> int:
        return self.daemon.stop(signal.SIGTERM, timeout=30)

    def task_files(self) -> set[str]:
        return {p.name for p in (self.state_dir / "bash-tasks").iterdir()}


def task_processes(markers: set[str] | None = None) -> list[psutil.Process]:
    """Live (non-zombie) processes carrying a bash task marker (any, or one of `markers`)."""
    found = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
                continue
            marker = proc.environ().get(MARKER_ENV)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if marker and (markers is None or marker in markers):
            found.append(proc)
    return found


def files_outside(root: Path, before: set[Path], allowed: Path) -> set[Path]:
    """Paths under `root` that were not there before and are not under `allowed`."""
    now = {p for p in root.rglob("*")}
    return {p for p in now - before if allowed not in p.parents and p != allowed}


def running_record_written(record: Path, pid: int) -> bool:
    """The task's running record renamed into place, and process `pid` (the engine's) no longer holds the pending
    one it replaced: until then that page is not free, and a flood of the full-disk tests would leave it free
    for a later record."""
    if not record.exists() or json.loads(record.read_text())["state"] != "running":
        return False
    fds = Path(f"/proc/{pid}/fd")
    links = []
    for fd in fds.iterdir():
        try:
            links.append(os.readlink(fd))
        except OSError:  # closed meanwhile
            continue
    return f"{record.name} (deleted)" not in {link.rsplit("/", 1)[-1] for link in links}
