"""kit/claude_tui.still_running, the wait of ClaudeTUI.stop(): an exited process counts as ended even when nobody
reaps it (the tmux server can miss claude's exit), and a process that still runs, in any of its threads, is
still reported once the deadline has passed."""

import subprocess
import sys
import time

import psutil
from daemon_harness import wait_until
from kit.claude_tui import still_running

# The main thread ends alone (the exit system call, not exit_group) while a second thread waits for stdin to close.
LEADER_EXITS_FIRST = """
import ctypes, sys, threading
threading.Thread(target=sys.stdin.read).start()
ctypes.CDLL(None).syscall(60, 0)
"""


def test_an_exited_process_nobody_reaped_has_ended():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    proc = psutil.Process(child.pid)
    wait_until(lambda: proc.status() == psutil.STATUS_ZOMBIE, 10, "the child's exit")
    began = time.monotonic()
    assert still_running([proc], 30) == []
    assert time.monotonic() - began < 10  # not the whole 30 s that waiting for the reaping would take
    child.wait()


def test_a_process_that_runs_on_is_reported_at_the_deadline():
    child = subprocess.Popen(["sleep", "60"])
    try:
        proc = psutil.Process(child.pid)
        assert still_running([proc], 0.2) == [proc]
    finally:
        child.kill()
        child.wait()


def test_a_zombie_main_thread_whose_other_thread_runs_is_still_running():
    child = subprocess.Popen([sys.executable, "-c", LEADER_EXITS_FIRST], stdin=subprocess.PIPE)
    try:
        proc = psutil.Process(child.pid)
        wait_until(lambda: proc.status() == psutil.STATUS_ZOMBIE, 10, "the main thread's exit")
        assert still_running([proc], 0.2) == [proc]
        child.stdin.close()
        assert still_running([proc], 10) == []
    finally:
        child.kill()
        child.wait()
