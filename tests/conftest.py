"""Shared fixtures; the helpers behind them live in tests/daemon_harness.py."""

import signal
import sys

import pytest
from daemon_harness import ECHO_SERVER, DaemonProcess, start_daemon, todo_sink
from kit.claude import claude_bin, mock_api  # noqa: F401 - the one pair of claude fixtures, for every folder
from kit.claude_tui import claude_tui  # noqa: F401 - the interactive claude in tmux, for every folder
from small_disk import mount_small_disk, unmount

# A shell without job control starts a background command (`scripts/test &`, `nohup`) with SIGINT ignored, and
# an ignored signal stays ignored across exec: every task the in-process engines of these tests started would
# ignore the graceful kill (SIGINT), and the kill tests failed (seen when the suite was run in the background).
# The daemon itself does not depend on this: it serves with a SIGINT handler of its own (common/serving/serve.py),
# which exec resets to the default in each task.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def daemon_factory(tmp_path):
    """start(argv, env=None) -> DaemonProcess; every daemon started is stopped at teardown."""
    started: list[DaemonProcess] = []

    def start(argv, env=None, workdir=None):
        d = start_daemon(argv, workdir or tmp_path, env)
        started.append(d)
        return d

    yield start
    for d in started:
        if d.proc.poll() is None:
            d.stop(signal.SIGKILL)


@pytest.fixture(scope="session")
def echo_daemon(tmp_path_factory):
    """The transport serving the test-only echo tool set (tests/kit/echo_server.py), shared by a session."""
    d = start_daemon([sys.executable, str(ECHO_SERVER)], tmp_path_factory.mktemp("echo"))
    yield d
    d.stop()


@pytest.fixture
def sink():
    """A running `hive-todos serve`; the value is its socket path (pass it as --agent-socket)."""
    with todo_sink() as path:
        yield path


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs at tmp_path/disk for the full-disk tests (skipped, saying why, where it cannot be mounted)."""
    disk = mount_small_disk(tmp_path / "disk", 2 * 1024 * 1024)
    yield disk
    unmount(disk)
