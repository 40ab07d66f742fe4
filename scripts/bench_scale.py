"""How the bash daemon's costs grow: 10, 100 and 1,000 running tasks; 1 KiB to 1 GiB of output.

Scaling curves beside same-run baselines: spawning the same processes straight
from `subprocess`, and writing the same bytes straight to a file. Where no outside baseline exists (status,
list, RSS), the smallest scale measured in the same run is the baseline, so the ratio *is* the growth.
The output is NUL bytes (`head -c N /dev/zero`): the worst case for a status tail, each byte shown as `\x00`.
Transport scaling (1 to 64 clients) is in bench_transport.py and not repeated here.

Everything lives under ctx.workdir; every process started here is stopped (and checked) before returning.
"""

import itertools
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
from bench_support import VENV_BIN, Daemon, McpConnection, Row, percentiles, timed

DAEMON = [str(VENV_BIN / "hive-bash-daemon")]
SLEEP_CMD = "sleep 600"
ACTIVE = ("pending", "running")
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def _data(result: dict) -> dict:
    if result.get("isError"):
        raise RuntimeError(result["content"][0]["text"].strip())
    return result["structuredContent"]


def _cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def _daemon(workdir: Path, max_running: int) -> Daemon:
    return Daemon([*DAEMON, "--state-dir", str(workdir / "state"), "--max-running", str(max_running),
                   "--keep-tasks", "1000000"], workdir)


# ----- 10 / 100 / 1,000 concurrently running tasks -------------------------------------------------------------


def _baseline_spawn(n: int, workdir: Path) -> tuple[float, float, float]:
    """(wall s per spawn, parent CPU s per spawn, s to killpg+reap all) for n `bash -c 'sleep 600'` spawned as
    the daemon spawns them: own session, stdin /dev/null, stdout/stderr onto a file."""
    procs: list[subprocess.Popen] = []
    for _ in range(3):  # warm-up: bash in the page cache, subprocess's first-call costs paid
        subprocess.run(["bash", "-c", "true"], stdin=subprocess.DEVNULL, check=True)
    with open(workdir / f"baseline-{n}.out", "wb") as out:
        cpu0, t0 = time.process_time(), time.perf_counter()
        try:
            for _ in range(n):
                procs.append(subprocess.Popen(["bash", "-c", SLEEP_CMD], stdin=subprocess.DEVNULL, stdout=out,
                                              stderr=out, start_new_session=True, close_fds=True))
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        finally:
            t1 = time.perf_counter()
            for p in procs:
                os.killpg(p.pid, signal.SIGKILL)
            for p in procs:
                p.wait()
            reap = time.perf_counter() - t1
    return wall / n, cpu / n, reap


def _wait_all_running(conn: McpConnection, n: int, deadline_s: float) -> int:
    deadline = time.monotonic() + deadline_s
    while True:
        running = _data(conn.call("list", {"state": "running", "limit": 1}))["total"]
        if running >= n or time.monotonic() > deadline:
            return running
        time.sleep(0.01)


def _survivors(pids: list[int]) -> int:
    """Task processes still alive after the daemon stopped (killed here so nothing outlives the bench)."""
    left = 0
    for pid in pids:
        try:
            p = psutil.Process(pid)
            if p.cmdline()[:2] == ["sleep", "600"] and p.status() != psutil.STATUS_ZOMBIE:
                left += 1
                p.kill()
        except psutil.Error:
            pass
    return left


def _one_scale(ctx, n: int) -> dict:
    """Every figure for n running tasks, in one daemon, stopped at the end."""
    workdir = ctx.workdir / f"scale-{n}"
    f: dict = {"n": n}
    f["spawn_s"], f["spawn_cpu_s"], f["reap_s"] = _baseline_spawn(n, workdir.parent)
    pids: list[int] = []
    d = _daemon(workdir, max_running=n)
    try:
        conn = McpConnection(d.port)
        _data(conn.call("list", {}))  # warm-up: first connection, imports behind the first call
        daemon = psutil.Process(d.proc.pid)
        f["rss_idle"] = daemon.memory_info().rss / MiB
        cpu0, t0 = _cpu_seconds(d.proc.pid), time.perf_counter()
        ids = [_data(conn.call("run", {"cmd": SLEEP_CMD, "wait_seconds": 0}))["id"] for _ in range(n)]
        f["submit_s"] = (time.perf_counter() - t0) / n
        f["running"] = _wait_all_running(conn, n, 120)
        f["start_s"] = (time.perf_counter() - t0) / n
        f["cpu_per_task_s"] = (_cpu_seconds(d.proc.pid) - cpu0) / n
        idle = 1.0 if not ctx.quick else 0.5
        cpu1 = _cpu_seconds(d.proc.pid)
        time.sleep(idle)  # nothing to wait for: this measures what the daemon burns while merely supervising
        f["idle_cpu_pct"] = (_cpu_seconds(d.proc.pid) - cpu1) / idle * 100
        statuses = []
        for task_id in ids:  # every task once (its pid, for the survivor check), then round again to 200 calls
            t = time.perf_counter()
            data = _data(conn.call("status", {"id": task_id}))
            statuses.append(time.perf_counter() - t)
            pids.append(data["pid"])
        again = itertools.cycle(ids)
        statuses += timed(lambda: _data(conn.call("status", {"id": next(again)})), max(0, ctx.reps(200, 100) - n))
        f["status"] = percentiles(statuses)
        f["status_n"] = len(statuses)
        lists = timed(lambda: _data(conn.call("list", {})), ctx.reps(50, 20))
        f["list"] = percentiles(lists)
        f["list_n"] = len(lists)
        f["rss"] = daemon.memory_info().rss / MiB
        f["threads"] = daemon.num_threads()
        conn.close()
    finally:  # SIGTERM, timed to the daemon's exit
        stop_started = time.monotonic()
        d.__exit__(None, None, None)
        f["stop_s"] = time.monotonic() - stop_started
    records = list((workdir / "state" / "bash-tasks").glob("*.json"))
    states = [json.loads(r.read_bytes())["state"] for r in records]
    f["interrupted"] = states.count("interrupted")
    f["survivors"] = _survivors(pids)
    return f


def _scale_rows(f: dict, first: dict) -> list[Row]:
    n = f["n"]

    def base(key: str) -> tuple[str, float | None]:
        """The smallest scale's median as this scale's baseline: the ratio is the growth."""
        if first is f:
            return "", None
        return f"same at {first['n']} tasks", first[key][0]

    rows = [
        Row("scale", f"{n} tasks: run(wait 0) until all running, per task", "ms", f["start_s"] * 1000, None, n,
            "Popen bash -c sleep, per spawn", f["spawn_s"] * 1000,
            ok=None if f["running"] == n else False,
            note=f"run calls alone {f['submit_s'] * 1000:.2f} ms/task" + ("" if f["running"] == n else
                                                                           f"; only {f['running']} running")),
        Row("scale", f"{n} tasks: daemon CPU per task started", "ms", f["cpu_per_task_s"] * 1000, None, n,
            "parent CPU per Popen", f["spawn_cpu_s"] * 1000,
            note=f"idle with {n} running: {f['idle_cpu_pct']:.1f}% CPU, {f['threads']} threads; 10 ms ticks"),
    ]
    label, value = base("status")
    rows.append(Row("scale", f"{n} tasks: status of a running task", "ms", *f["status"], f["status_n"], label,
                    value, target="p99 < 50 ms" if n >= 1000 else "",
                    ok=f["status"][1] < 50 if n >= 1000 else None))
    label, value = base("list")
    rows.append(Row("scale", f"{n} tasks: list (default limit 50)", "ms", *f["list"], f["list_n"], label, value,
                    note=f"{min(n, 50)} rows shown"))
    rows.append(Row("scale", f"{n} tasks: daemon RSS", "MiB", f["rss"], None, 1, "same daemon before any task",
                    f["rss_idle"], target="< 200 MiB" if n >= 1000 else "", ok=f["rss"] < 200 if n >= 1000 else None))
    clean = f["interrupted"] == n and f["survivors"] == 0
    rows.append(Row("scale", f"{n} tasks: SIGTERM -> daemon exited", "s", f["stop_s"], None, 1,
                    "killpg+reap directly", f["reap_s"], ok=clean,
                    note=f"{f['interrupted']}/{n} recorded interrupted, {f['survivors']} left alive"))
    return rows


def running_tasks(ctx):
    scales = [10, 100] if ctx.quick else [10, 100, 1000]
    rows: list[Row] = []
    first = None
    for n in scales:
        f = _one_scale(ctx, n)
        first = first or f
        rows += _scale_rows(f, first)
    if ctx.quick:
        rows[-1].note += "; --quick stops at 100 tasks"
    return rows


# ----- 1 KiB .. 1 GiB of output ------------------------------------------------------------------------------


def _size_label(size: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size >= scale:
            return f"{size // scale} {unit}"
    return f"{size} B"


def _direct_write(cmd: str, out: Path) -> float:
    """The baseline: the same bash command, its stdout and stderr straight onto files."""
    t = time.perf_counter()
    with open(out, "wb") as o, open(out.with_suffix(".err"), "wb") as e:
        subprocess.run(["bash", "-c", cmd], stdin=subprocess.DEVNULL, stdout=o, stderr=e, check=True)
    elapsed = time.perf_counter() - t
    out.unlink()
    out.with_suffix(".err").unlink()
    return elapsed


def _daemon_write(conn: McpConnection, cmd: str) -> tuple[float, float, dict]:
    """(wall s, task CPU s, final status) for run(wait 0) + status(wait 30) until the task ends."""
    t = time.perf_counter()
    task_id = _data(conn.call("run", {"cmd": cmd, "wait_seconds": 0}))["id"]
    data = _data(conn.call("status", {"id": task_id, "wait_seconds": 30}))
    while data["status"] in ACTIVE:
        data = _data(conn.call("status", {"id": task_id, "wait_seconds": 30}))
    wall = time.perf_counter() - t
    if data["status"] != "done" or data["exit_code"] != 0:
        raise RuntimeError(f"{cmd!r} ended {data['status']} exit={data['exit_code']}")
    return wall, data["rusage"]["cpu_seconds"], data


def _status_pair(conn: McpConnection, big: str, small: str, n: int) -> tuple[list[float], list[float]]:
    """status of the big task and of a full-tail small one, alternated in halves so noise hits both alike."""
    big_s, small_s = [], []
    for _ in range(2):
        big_s += timed(lambda: _data(conn.call("status", {"id": big})), n // 2)
        small_s += timed(lambda: _data(conn.call("status", {"id": small})), n // 2)
    return big_s, small_s


def output_sizes(ctx):
    plan = [(KiB, 20, 10), (MiB, 10, 5), (64 * MiB, 4, 2), (GiB, 3, 0)]  # (size, reps full, reps quick)
    rows: list[Row] = []
    with _daemon(ctx.workdir / "sizes", max_running=4) as d:
        conn = McpConnection(d.port)
        # The status baseline: a task whose output is exactly one full tail (4 KiB of the same bytes), so
        # a bigger output shows the same text and any difference is the file's size alone.
        small = _daemon_write(conn, "head -c 4096 /dev/zero")[2]["id"]
        for size, full, quick in plan:
            reps = ctx.reps(full, quick)
            if reps == 0:
                continue
            cmd = f"head -c {size} /dev/zero"
            direct, wall, task_cpu, daemon_cpu = [], [], [], 0.0
            for _ in range(reps):  # alternate, so machine noise hits both alike
                direct.append(_direct_write(cmd, ctx.workdir / "direct.out"))
                cpu0 = _cpu_seconds(d.proc.pid)
                w, tc, last = _daemon_write(conn, cmd)
                daemon_cpu += _cpu_seconds(d.proc.pid) - cpu0
                wall.append(w)
                task_cpu.append(tc)
                if len(wall) < reps:
                    Path(last["stdout"]["path"]).unlink()  # keep only the last rep's file: the disk stays small
            if last["stdout"]["size"] != size:
                raise RuntimeError(f"{cmd!r} wrote {last['stdout']['size']} bytes")
            big_s, small_s = _status_pair(conn, last["id"], small, ctx.reps(200, 60))
            Path(last["stdout"]["path"]).unlink()
            label = _size_label(size)
            med, p99 = percentiles(wall)
            rows.append(Row("scale", f"{label} stdout: run + status wait until done", "ms", med, p99, reps,
                            "same bash, stdout to a file", percentiles(direct)[0]))
            rows.append(Row("scale", f"{label} stdout: daemon CPU per task", "ms", daemon_cpu / reps * 1000, None,
                            reps, "the task's own CPU", percentiles(task_cpu)[0],
                            note="mean; includes the run and status calls; 10 ms clock ticks"))
            smed, sp99 = percentiles(big_s)
            rows.append(Row("scale", f"{label} stdout: status of the finished task", "ms", smed, sp99, len(big_s),
                            "same for a 4 KiB output", percentiles(small_s)[0], target="median < 5 ms",
                            ok=smed < 5.0))
        conn.close()
    if ctx.quick:
        rows[-1].note = "--quick stops at 64 MiB"
    return rows


BENCHMARKS = [running_tasks, output_sizes]
