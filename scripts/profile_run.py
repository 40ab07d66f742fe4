"""What one `run("true", wait_seconds=30)` costs the bash daemon, in counts that do not move with the machine's
load: Python and C calls per run on the request thread and on the workers (cProfile, one profiler a thread),
and how often the registry's lock is entered. Wall and CPU medians are printed too, marked load-dependent.

The daemon is built as `hive-bash-daemon` builds it (its settings, engine, tools and MCP app) in a child
process, with the serving loop replaced by a driver that hands each request to the WSGI app on the main
thread: no HTTP and no waitress loop, so the counts are the app's alone. `--tree DIR` runs another checkout's
code with this interpreter (e.g. an older commit: `git worktree add /tmp/old COMMIT`), so two trees compare
with the same script:

    scripts/profile_run                   # this checkout
    scripts/profile_run --tree /tmp/old   # another one, then compare the two
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WARM_UP = 100
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "hive/structured": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose code runs (default: this one)")
    parser.add_argument("-n", type=int, default=500, help=f"run() calls measured, after {WARM_UP} warm-up calls")
    parser.add_argument("--top", type=int, default=0, help="also list the N most-called functions of each part")
    parser.add_argument("--opcodes", action="store_true",
                        help="count bytecode instructions executed a run instead of calls (the interpreter's own "
                             "work, which the daemon's CPU under load follows; no wall or CPU figures)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.n, args.top, args.opcodes)
        return
    env = {k: v for k, v in os.environ.items() if k not in ("HIVE_AGENT_SOCKET", "PYTHONPATH")}
    env |= {"PYTHONPATH": str(args.tree.resolve()), "HIVE_BASH_KEEP_TASKS": "100000"}
    (REPO / ".cache").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=REPO / ".cache", prefix="profile-run-") as state:
        child = [sys.executable, str(Path(__file__).resolve()), "--child", "-n", str(args.n), "--top", str(args.top),
                 *(["--opcodes"] if args.opcodes else [])]
        sys.exit(subprocess.run(child, cwd=state, env=env, stdin=subprocess.DEVNULL).returncode)


def _child(n: int, top: int, opcodes: bool) -> None:
    import common.serving.serve

    def drive(app, settings, *, on_stop, listener=None) -> None:
        try:
            (_count_opcodes if opcodes else _measure)(app, str(settings.port or 1), n, top)
        finally:
            on_stop()

    common.serving.serve.serve_daemon = drive  # the daemon's own start, with this driver in place of the serving loop
    if opcodes:
        threading.settrace(_trace_if_counting)
        sys.settrace(_trace_if_counting)
    else:
        _profile_new_threads()
    sys.argv = ["hive-bash-daemon", "--port", "0", "--log-level", "warning"]
    from hivebash.cli import daemon_main
    daemon_main()


def _call(app, port: str, call_id: int) -> bytes:
    """One tools/call of run("true") through the WSGI app, as waitress would hand it over (then the body's
    close, which runs the work left for after the answer)."""
    body = json.dumps({"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": {
        "name": "run", "arguments": {"cmd": "true", "wait_seconds": 30}, "_meta": META}}).encode()
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/mcp", "SCRIPT_NAME": "", "QUERY_STRING": "",
               "SERVER_NAME": "127.0.0.1", "SERVER_PORT": port, "SERVER_PROTOCOL": "HTTP/1.1",
               "REMOTE_ADDR": "127.0.0.1", "REMOTE_PORT": "40000", "HTTP_HOST": f"127.0.0.1:{port}",
               "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
               "HTTP_ACCEPT": "application/json, text/event-stream", "HTTP_MCP_PROTOCOL_VERSION": "2026-07-28",
               "HTTP_MCP_METHOD": "tools/call", "HTTP_MCP_NAME": "run", "wsgi.input": io.BytesIO(body),
               "wsgi.input_terminated": True, "wsgi.url_scheme": "http", "wsgi.version": (1, 0),
               "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False}
    status: list[str] = []
    answer = app(environ, lambda s, headers, exc_info=None: status.append(s) or (lambda data: None))
    data = b"".join(answer)
    answer.close()
    if not status or not status[0].startswith("200") or b'"isError": true' in data:
        raise SystemExit(f"run failed: {status} {data[:300]!r}")
    return data


def _measure(app, port: str, n: int, top: int) -> None:
    import cProfile

    for i in range(WARM_UP):
        _call(app, port, i)
    walls, cpus = [], []
    for i in range(n):  # unprofiled: the load-dependent figures
        wall, cpu = time.perf_counter(), time.thread_time()
        _call(app, port, WARM_UP + i)
        cpus.append(time.thread_time() - cpu)
        walls.append(time.perf_counter() - wall)
    for _, profile in THREADS:  # the other threads' profilers count from here
        profile.clear()
    request = cProfile.Profile()
    request.enable()
    for i in range(n):
        _call(app, port, WARM_UP + n + i)
    request.disable()
    _report(n, walls, cpus, [("request thread", request), *THREADS], top)


COUNTING = threading.Event()
OPCODES: list[dict[tuple[str, str, str], int]] = []  # one dict a thread, (part, file, function) -> instructions
_MINE = threading.local()  # this thread's dict: each thread adds to its own only, so no count is lost


def _part(name: str) -> str:
    """A thread's part of the report: the driver's thread is the request thread, pooled workers one part."""
    if name in ("MainThread", "request thread"):
        return "request thread"
    return "bash-worker" if name.startswith("task-") else name.rstrip("0123456789").rstrip("-")


def _trace_if_counting(frame, event, arg):
    """The trace function of every thread: while COUNTING, each Python frame counts its instructions."""
    if not COUNTING.is_set():
        return None
    key = (_part(threading.current_thread().name), frame.f_code.co_filename, frame.f_code.co_name)
    counts = getattr(_MINE, "counts", None)
    if counts is None:
        counts = _MINE.counts = {}
        OPCODES.append(counts)
    frame.f_trace_opcodes = True

    def count(frame, event, arg):
        if event == "opcode":
            counts[key] = counts.get(key, 0) + 1
        return count

    return count


def _count_opcodes(app, port: str, n: int, top: int) -> None:
    for i in range(WARM_UP):
        _call(app, port, i)
    COUNTING.set()
    for i in range(n):
        _call(app, port, WARM_UP + i)
    COUNTING.clear()
    parts: dict[str, dict[tuple[str, str], int]] = {}
    for counts in OPCODES:
        for (part, f, fn), count in counts.items():
            mine = parts.setdefault(part, {})
            mine[(f, fn)] = mine.get((f, fn), 0) + count
    print(f"code: {sys.modules['hivebash'].__file__.rsplit('/hivebash/', 1)[0]}; {n} run(\"true\", wait_seconds=30)")
    print(f"  all parts: {sum(sum(c.values()) for c in parts.values()) / n:.0f} bytecode instructions a run")
    for part, counts in sorted(parts.items(), key=lambda kv: -sum(kv[1].values())):
        print(f"  {part}: {sum(counts.values()) / n:.0f} instructions a run")
        for (f, fn), c in sorted(counts.items(), key=lambda kv: -kv[1])[:top]:
            print(f"      {c / n:7.1f}  {f.replace(str(REPO) + '/', '')} {fn}")


THREADS: list[tuple[str, object]] = []  # (thread name, its cProfile.Profile), one a thread the daemon starts


def _profile_new_threads() -> None:
    """Give every thread started from now on a profiler of its own from its first call (Python 3.11 sets a
    profile function for the calling thread only; the pooled workers start during the warm-up)."""
    import cProfile

    def first_call(frame, event, arg) -> None:
        profile = cProfile.Profile()
        THREADS.append((threading.current_thread().name, profile))
        sys.setprofile(None)
        profile.enable()

    threading.setprofile(first_call)


def _report(n: int, walls: list[float], cpus: list[float], profiles, top: int) -> None:
    parts: dict[str, list] = {}
    for name, profile in profiles:
        part = _part(name)
        profile.create_stats()
        if profile.stats:
            parts.setdefault(part, []).append(profile.stats)
    print(f"code: {sys.modules['hivebash'].__file__.rsplit('/hivebash/', 1)[0]}; {n} run(\"true\", wait_seconds=30)")
    for part, stats in parts.items():
        merged: dict = {}
        for st in stats:
            for key, (_, calls, *_rest) in st.items():
                merged[key] = merged.get(key, 0) + calls
        python = sum(c for (f, _, _), c in merged.items() if f != "~") / n
        native = sum(c for (f, _, _), c in merged.items() if f == "~") / n
        locks = sum(c for (f, _, fn), c in merged.items()
                    if f.endswith("hivebash/tasks/registry.py") and fn == "__enter__") / n
        print(f"  {part}: {python:.1f} Python calls, {native:.1f} C calls a run; "
              f"the registry's lock entered {locks:.1f}x")
        for (f, line, fn), c in sorted(merged.items(), key=lambda kv: -kv[1])[:top]:
            print(f"      {c / n:7.2f}  {f.replace(str(REPO) + '/', '')}:{line} {fn}")
    print(f"  (load-dependent) wall median {statistics.median(walls) * 1e3:.3f} ms, request thread CPU median "
          f"{statistics.median(cpus) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
