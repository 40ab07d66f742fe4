"""What every benchmark module shares: the result row, timing helpers, the table, starting a daemon."""

import fcntl
import json
import os
import shutil
import signal
import statistics
import struct
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin"


# Where a benchmark's daemons keep their state, tried in this order; the quickest to create files in wins.
# The first is marked a "top directory" for ext4's allocator (see choose_workdir).
SPREAD_PARENT = REPO / ".cache" / "bench"
WORKDIR_PARENTS = (str(SPREAD_PARENT), "/tmp", "/var/tmp")
PROBE_FILES = 200
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_TOPDIR_FL = 0x80086601, 0x40086602, 0x00020000  # linux/fs.h


def mark_top_directory(path: Path) -> bool:
    """chattr +T: ext4 then places each new subdirectory in a block group of its own choosing (with free
    inodes and blocks) instead of next to its parent's. False where the file system does not support it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        flags = struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 4))[0]
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("i", flags | FS_TOPDIR_FL))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def file_creation_cost(directory: Path, files: int = PROBE_FILES) -> float:
    """Seconds per new empty file in `directory` (created, never deleted: a deletion is what slows the
    next creation down, see choose_workdir)."""
    started = time.perf_counter()
    for i in range(files):
        os.close(os.open(directory / f".probe-{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    return (time.perf_counter() - started) / files


def choose_workdir(parents=WORKDIR_PARENTS) -> tuple[Path, list[tuple[str, float]]]:
    """A fresh directory for the daemons' state, in the parent where creating a file costs least now.

    Why: on ext4 without a journal (these VMs), each file creation scans past every inode of its block group
    freed in the last minute (ext4's recently_deleted(); 5 minutes while the inode table is dirty). After a
    test suite or an earlier bench run deleted its files, a new file near them cost 470-1000 us instead of
    ~17 us (measured: 20,000 files deleted in /tmp, then creations in new directories under /tmp and under the
    repository). Every task creates four files, so the bash figures measured that file system, not the daemon.
    A directory elsewhere on the disk is not slowed down. The bench's own state parent is marked a top
    directory, so that each run's directory lands in a block group away from the files of earlier runs
    (measured: 12-13 us per creation right after 20,000 deletions beside it, where plain new directories next
    to them cost 200-460 us). The figures of every candidate are printed."""
    tried: list[tuple[str, float]] = []
    candidates: list[tuple[float, Path]] = []
    for parent in parents:
        try:
            Path(parent).mkdir(parents=True, exist_ok=True)
            if Path(parent) == SPREAD_PARENT:
                mark_top_directory(SPREAD_PARENT)
            candidate = Path(tempfile.mkdtemp(prefix="hive-bench-", dir=parent))
        except OSError:
            continue
        candidates.append((file_creation_cost(candidate), candidate))
        tried.append((parent, candidates[-1][0]))
    if not candidates:
        raise RuntimeError(f"no usable directory for the benchmark's state among {', '.join(parents)}")
    best = min(candidates)[1]
    for _, loser in candidates:  # a few hundred empty probe files each
        if loser != best:
            shutil.rmtree(loser, ignore_errors=True)
    return best, tried


@dataclass
class BenchContext:
    quick: bool
    workdir: Path
    flood_seconds: float | None = None  # bench_flood's duration (None: its default)

    def reps(self, full: int, quick: int) -> int:
        return quick if self.quick else full


@dataclass
class Row:
    area: str
    name: str
    unit: str
    median: float | None = None
    p99: float | None = None
    n: int = 0
    baseline: str = ""
    baseline_median: float | None = None
    target: str = ""
    ok: bool | None = None
    note: str = ""
    ratio: float | None = field(default=None)

    def __post_init__(self):
        if self.ratio is None and self.median is not None and self.baseline_median:
            self.ratio = self.median / self.baseline_median

    def as_dict(self) -> dict:
        return asdict(self)

    def one_line(self) -> str:
        parts = [self.name, _fmt(self.median, self.unit)]
        if self.baseline_median is not None:
            parts.append(f"vs {self.baseline} {_fmt(self.baseline_median, self.unit)}")
        if self.ratio is not None:
            parts.append(f"ratio {self.ratio:.2f}")
        if self.ok is not None:
            parts.append("OK" if self.ok else "MISSED")
        return "  ".join(parts)


def _fmt(value, unit) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:.3f} ms" if value < 10 else f"{value:.1f} ms"
    if unit in ("/s", "calls/s", "tasks/s"):
        return f"{value:,.0f} {unit}"
    return f"{value:,.2f} {unit}"


def format_table(rows: list[Row]) -> str:
    head = ["area", "benchmark", "median", "p99", "n", "baseline", "baseline median", "ratio", "target", "verdict"]
    body = [[r.area, r.name, _fmt(r.median, r.unit), _fmt(r.p99, r.unit), str(r.n or ""), r.baseline,
             _fmt(r.baseline_median, r.unit), f"{r.ratio:.2f}" if r.ratio is not None else "", r.target,
             {True: "ok", False: "MISSED", None: ""}[r.ok] + (f" ({r.note})" if r.note else "")] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))  # noqa: E731
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(b) for b in body])


def percentiles(samples_s: list[float]) -> tuple[float, float]:
    """(median, p99) of durations in seconds, returned in milliseconds."""
    ordered = sorted(samples_s)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1000, p99 * 1000


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


class Daemon:
    """A daemon started on port 0 for a benchmark; stopped with SIGTERM on exit."""

    def __init__(self, argv: list[str], workdir: Path, env: dict | None = None):
        workdir.mkdir(parents=True, exist_ok=True)
        ready = workdir / "ready.json"
        self.log = open(workdir / "daemon.log", "wb")
        self.proc = subprocess.Popen([*argv, "--port", "0", "--ready-file", str(ready)], stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir,
                                     env=dict(os.environ, **(env or {})))
        deadline = time.monotonic() + 30
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{argv[0]} did not start; see {workdir / 'daemon.log'}")
            time.sleep(0.02)
        self.url = json.loads(ready.read_text())["url"]
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class McpConnection:
    """One keep-alive HTTP connection speaking 2026-07-28 tools/call: measures the server, not a client library."""

    def __init__(self, port: int, host: str = "127.0.0.1"):
        import http.client

        self.conn = http.client.HTTPConnection(host, port, timeout=120)
        self.meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                     "io.modelcontextprotocol/clientCapabilities": {}, "hive/structured": True}
        self.next_id = 0

    def call(self, name: str, arguments: dict) -> dict:
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                           "params": {"name": name, "arguments": arguments, "_meta": self.meta}})
        self.conn.request("POST", "/mcp", body=body, headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name})
        response = self.conn.getresponse()
        payload = json.loads(response.read())
        if "error" in payload:
            raise RuntimeError(f"{name}: {payload['error']}")
        return payload["result"]

    def close(self):
        self.conn.close()
