"""Output that cannot fill the disk: a task writing at full speed (`yes` into its file) under --max-output-bytes
64 MiB, against the same task with no limit, measured in the same run.

Figures: the file's bytes on disk (st_blocks) at every sample while the task writes (the most seen, and how
many samples were past the limit), the task's own throughput (bytes written / seconds) with the limit against
without it, and the daemon's CPU over the run (the output guard's looks and punches: the bytes never pass
through the daemon). The flood lasts --flood-seconds (20 s; --quick: 4 s); the run with no limit is cut short
to what the state filesystem can hold with room to spare (a quarter of its free space at ~2 GB/s).
"""

import os
import threading
import time

import psutil
from bench_support import VENV_BIN, Daemon, McpConnection, Row

DAEMON = [str(VENV_BIN / "hive-bash-daemon")]
LIMIT = 64 << 20
SAMPLE = 0.002  # seconds between two looks at the file's blocks
FLOOD_RATE = 2e9  # bytes/s `yes` may reach on a fast box: sizes the run with no limit


class Sampler(threading.Thread):
    """Looks at a file's blocks every SAMPLE seconds until stopped: the most, and the samples past `limit`."""

    def __init__(self, path: str, limit: int):
        super().__init__(daemon=True)
        self.path, self.limit = path, limit
        self.most = self.samples = self.past = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(SAMPLE):
            try:
                blocks = os.stat(self.path).st_blocks * 512
            except FileNotFoundError:
                continue
            self.most = max(self.most, blocks)
            self.samples += 1
            self.past += blocks > self.limit


def _flood(workdir, limit: int, seconds: float) -> dict:
    """One daemon, one `timeout SECONDS yes` task: its throughput, the file's blocks sampled, the daemon's CPU."""
    with Daemon([*DAEMON, "--max-output-bytes", str(limit), "--max-state-bytes", "0"], workdir) as d:
        conn = McpConnection(d.port)
        daemon = psutil.Process(d.proc.pid)
        cpu0 = sum(daemon.cpu_times()[:2])
        started = time.monotonic()
        got = conn.call("run", {"cmd": f"timeout {seconds:g} yes", "wait_seconds": 0})["structuredContent"]
        sampler = Sampler(got["stdout"]["path"], limit)
        sampler.start()
        time.sleep(max(0.0, started + seconds * 0.95 - time.monotonic()))  # the task still writes
        writing = (sum(daemon.cpu_times()[:2]) - cpu0, time.monotonic() - started)
        while conn.call("status", {"id": got["id"], "wait_seconds": 30})["structuredContent"]["status"] == "running":
            pass
        wall = time.monotonic() - started
        sampler.stop.set()
        sampler.join()
        end = conn.call("status", {"id": got["id"]})["structuredContent"]
        cpu = sum(daemon.cpu_times()[:2]) - cpu0
        blocks = os.stat(end["stdout"]["path"]).st_blocks * 512
        conn.close()
    written = end["stdout"]["size"]
    return {"rate": written / end["duration"], "written": written, "most": sampler.most, "past": sampler.past,
            "samples": sampler.samples, "end_blocks": blocks, "cpu": cpu, "wall": wall, "writing": writing}


def _share(cpu_wall: tuple[float, float]) -> float:
    cpu, wall = cpu_wall
    return cpu / wall * 100 if wall > 0 else 0.0


def flood(ctx):
    seconds = ctx.flood_seconds or (4.0 if ctx.quick else 20.0)
    free = os.statvfs(ctx.workdir).f_bavail * os.statvfs(ctx.workdir).f_frsize
    free_seconds = round(max(0.5, min(seconds, free / 4 / FLOOD_RATE)), 1)
    limited = _flood(ctx.workdir / "flood-limited", LIMIT, seconds)
    unlimited = _flood(ctx.workdir / "flood-unlimited", 0, free_seconds)
    mib = 1 << 20
    return [
        Row("bash", f"`yes` for {seconds:g} s, --max-output-bytes 64 MiB: most bytes on disk of any sample", "MiB",
            limited["most"] / mib, None, limited["samples"], target="limit + slack (< 160 MiB)",
            ok=limited["most"] < 160 * mib, note=f"{limited['past']} of {limited['samples']} samples past 64 MiB; "
            f"{limited['end_blocks'] / mib:.1f} MiB at the end, of {limited['written'] / mib:,.0f} MiB written"),
        Row("bash", f"`yes` for {seconds:g} s under the 64 MiB limit: the task's own throughput", "MB/s",
            limited["rate"] / 1e6, None, 1, f"no limit ({free_seconds:g} s)", unlimited["rate"] / 1e6,
            target="ratio > 0.8", ok=limited["rate"] > 0.8 * unlimited["rate"]),
        Row("bash", f"`yes` for {seconds:g} s under the 64 MiB limit: daemon CPU while it writes", "% of a core",
            _share(limited["writing"]), None, 1, f"no limit ({free_seconds:g} s)", _share(unlimited["writing"]),
            note=f"with the end (its record's flush): {limited['cpu']:.2f} s over {limited['wall']:.1f} s, no limit "
                 f"{unlimited['cpu']:.2f} s over {unlimited['wall']:.1f} s"),
    ]


BENCHMARKS = [flood]
