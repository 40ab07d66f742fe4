"""A recording stand-in for the process seam (common.process_seam.LinuxProcessOps,
hivebash.processes.ops.LinuxTaskProcessOps): no process is started.

A fake, because what these tests check is which operation the engine asks for on each path (kill while
pending, starting, running, in the grace; timeouts; leftovers; restart), which with real processes depends on
timing. The real processes are covered by test_engine.py, test_engine_process.py and test_cli.py.

A spawned leader is a pid from a range no real process has (above the kernel's pid_max), whose exit is an
eventfd the fake writes to. A signal to a leader's group ends it with that signal unless the test said the
leader ignores it (`ignore`), as a shell with a `trap` would.
"""

import os
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from types import SimpleNamespace

from common.process_seam import ProcInfo

FIRST_PID = 1 << 23  # above any pid_max (4194304 at most on Linux)


@dataclass
class FakeLeader:
    pid: int
    marker: str
    efd: int
    status: int | None = None
    returncode: int | None = None
    stdout: object = None  # the read end of its output pipe, when spawned with stdout=subprocess.PIPE
    says: int | None = None  # the write end: what the test makes the leader print (`say`)


class RecordingOps:
    def __init__(self):
        self.calls = []  # (operation, details...) in order
        self.ignore: set[int] = set()  # signals the leaders ignore
        self.leftovers: dict[str, list[ProcInfo]] = {}  # task id -> processes it leaves (alive until stopped)
        self.descendants: dict[int, list[ProcInfo]] = {}  # pid -> what `tree` finds under it
        self.on_spawn = None  # called with each new leader (a subagent test makes it print claude's init line)
        self.hold_stop = False  # stop() waits for its deadline or an escalation, as the real one does
        self.spawn_gate = threading.Event()
        self.spawn_gate.set()
        self._cond = threading.Condition()  # guards everything below, and the calls
        self._leaders: dict[int, FakeLeader] = {}
        self._dead: set[int] = set()
        self._next = FIRST_PID

    # ----- what tests use -------------------------------------------------------------------------------------

    def record(self, *call):
        with self._cond:
            self.calls.append(call)
            self._cond.notify_all()

    def wait_for_call(self, predicate, timeout=10.0):
        """The first call matching `predicate`, waited for until `timeout` (None if none came)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = next((c for c in self.calls if predicate(c)), None)
                if found is not None or time.monotonic() >= deadline:
                    return found
                self._cond.wait(deadline - time.monotonic())

    def ops(self, name):
        with self._cond:
            return [c for c in self.calls if c[0] == name]

    def leader(self, pid) -> FakeLeader:
        with self._cond:
            return self._leaders[pid]

    def exit(self, pid, status):
        """The leader `pid` exits with the raw wait status `status` (e.g. 0, 3 << 8, signal.SIGINT)."""
        with self._cond:
            leader = self._leaders[pid]
            if leader.status is None:
                leader.status = status
                os.eventfd_write(leader.efd, 1)
                if leader.says is not None:  # its output pipe reaches EOF
                    os.close(leader.says)
                    leader.says = None

    def say(self, pid, line: bytes):
        """The leader `pid` prints `line` on its stdout pipe."""
        os.write(self.leader(pid).says, line)

    def left_behind(self, task_id, count):
        """`task_id` will leave `count` processes behind (found by marker, alive until stopped)."""
        procs = [ProcInfo(FIRST_PID + 100_000 + 10 * len(self.leftovers) + i, 1.0, task_id) for i in range(count)]
        self.leftovers[task_id] = procs
        return [p.pid for p in procs]

    def processes_of(self, task_id):
        with self._cond:
            return [p for p in self.leftovers.get(task_id, []) if p.pid not in self._dead]

    # ----- ProcessOps -----------------------------------------------------------------------------------------

    def spawn(self, argv, *, stdin, stdout, stderr, cwd, env, executable=None, pass_fds=()):
        self.record("spawn_begins", argv[-1])
        self.spawn_gate.wait(10)
        marker = env.get(b"HIVE_BASH_TASK", env.get("HIVE_BASH_TASK", b""))
        with self._cond:
            pid, self._next = self._next, self._next + 1
            leader = self._leaders[pid] = FakeLeader(pid, marker.decode() if isinstance(marker, bytes) else marker,
                                                     os.eventfd(0, os.EFD_CLOEXEC))
            if stdout == subprocess.PIPE:
                read_end, leader.says = os.pipe()
                leader.stdout = os.fdopen(read_end, "rb")
        self.record("spawn", pid, argv[-1])
        if self.on_spawn is not None:
            self.on_spawn(leader)
        return leader

    def exit_fd(self, leader):
        return os.dup(leader.efd)

    def reap(self, leader):
        self.record("reap", leader.pid)
        os.close(leader.efd)
        leader.returncode = leader.status
        return leader.status, SimpleNamespace(ru_utime=0.01, ru_stime=0.01, ru_maxrss=1024)

    def signal_group(self, pgid, signum):
        self.record("signal_group", pgid, signum)
        if pgid in self._leaders and (signum not in self.ignore or signum == signal.SIGKILL):
            self.exit(pgid, signum)
        return pgid in self._leaders

    def tree(self, pid):
        self.record("tree", pid)
        with self._cond:
            return [p for p in self.descendants.get(pid, []) if p.pid not in self._dead]

    def signal(self, procs, signum):
        self.record("signal", sorted(p.pid for p in procs), signum)

    def find(self, markers, descendants_only, exclude=(), leaders=None, fresh_after=None):
        self.record("find", sorted(markers), tuple(markers.values()))
        return {m: [p for p in self.processes_of(m.split(":")[0]) if p.pid not in exclude] for m in markers}

    def stop(self, procs, force, deadline, wake_fd=None, escalate=None):
        procs = list(procs)
        self.record("stop", sorted(p.pid for p in procs), force)
        while self.hold_stop and not force and wake_fd is not None and time.monotonic() < deadline:
            ready = select.select([wake_fd], [], [], max(0.0, deadline - time.monotonic()))[0]
            if ready:
                os.eventfd_read(wake_fd)
                if escalate is not None and escalate():
                    self.record("escalate", sorted(p.pid for p in procs))
                    break
        with self._cond:
            self._dead.update(p.pid for p in procs)

    def is_alive(self, info):
        with self._cond:
            return info.pid not in self._dead and any(info in ps for ps in self.leftovers.values())

    def orphans(self, fresh_after=None):
        return None

    def watch(self, pid):
        raise ProcessLookupError(pid)  # no real process to hold: the reaper does not watch it

    def reap_orphan(self, pid):
        self.record("reap_orphan", pid)
