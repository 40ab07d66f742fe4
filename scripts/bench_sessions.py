"""Sessions: the subagent daemon's look-ups in a crowded claude project folder, beside os.listdir + stat of it.

The folder of issue "[7] Subagent calls at any size of claude's project folder", generated here: 300
transcripts of ~1 MB (250 foreign without a name, 50 named sess-0 ... sess-49) and one foreign transcript of
~50 MB that grows by a line between calls, as the agent's own session does when the workdir is its home.
Each verb's first call after a daemon (re)start is measured on a daemon of its own, sharing one state directory
as a restarted service does (the index the last daemon saved is checked and read on), then repeated calls,
then calls with the 50 MB transcript growing before each one; the very first start on the folder, with
nothing saved, is a row of its own. Besides os.listdir + stat of the folder, each verb is measured on a
folder holding only the 50 named transcripts. claude is a shell script
that prints the init and result lines at once, so start and continue time the daemon, not claude.
Memory: the summaries of 1,000 transcripts (the same mix, smaller files), measured in-process with tracemalloc.
"""

import json
import os
import shutil
import sys
import time
import tracemalloc
from pathlib import Path

from bench_support import REPO, VENV_BIN, Daemon, McpConnection, Row, percentiles

sys.path.insert(0, str(REPO))
from hivesubagent.transcripts.sessions import SessionStore, project_slug

MiB = 1 << 20
TARGET_MS, GROWING_TARGET_MS, MEMORY_TARGET_MIB = 50.0, 20.0, 20.0
CLAUDE_STAND_IN = """#!/bin/sh
cat >/dev/null
echo '{"type":"system","subtype":"init","session_id":"bench","model":"claude-bench"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","total_cost_usd":0.01}'
"""


def _line(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def transcript_body(target_bytes: int, named: bool) -> bytes:
    """Turns shaped as claude writes them (prompt, tool use, tool result, answer, title, cost), to about
    `target_bytes`; @@NAME@@ and @@SID@@ are filled in per file."""
    common = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/home/agent",
              "sessionId": "@@SID@@", "version": "2.1.328", "gitBranch": "main"}
    out = [_line({"type": "custom-title", "customTitle": "@@NAME@@", "sessionId": "@@SID@@"})] if named else []
    size, i, cost = sum(map(len, out)), 0, 0.0
    while size < target_bytes:
        ts = f"2026-11-30T{10 + i // 3600 % 12:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
        cost += 0.01
        turn = [
            {**common, "type": "user", "message": {"role": "user", "content": f"turn {i}: the next step"},
             "timestamp": ts, "promptSource": "sdk"},
            {**common, "type": "assistant", "timestamp": ts,
             "message": {"id": f"m{i}a", "model": "claude-opus-5-5", "role": "assistant",
                         "content": [{"type": "tool_use", "id": f"t{i}", "name": "Bash",
                                      "input": {"command": "make test"}}],
                         "stop_reason": "tool_use"}},
            {**common, "type": "user", "timestamp": ts, "toolUseResult": {"stdout": "ok"},
             "message": {"role": "user",
                         "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "x" * 6000}]}},
            {**common, "type": "assistant", "timestamp": ts,
             "message": {"id": f"m{i}b", "model": "claude-opus-5-5", "role": "assistant",
                         "content": [{"type": "text", "text": "Done: " + "z" * 600}], "stop_reason": "end_turn"}},
            *([{"type": "custom-title", "customTitle": "@@NAME@@", "sessionId": "@@SID@@"}] if named else []),
            {"type": "cost-state", "totalCostUSD": round(cost, 4)},
        ]
        lines = [_line(e) for e in turn]
        out += lines
        size += sum(map(len, lines))
        i += 1
    return b"".join(out)


def build_folder(project: Path, foreign: int, named: int, file_bytes: int, big_bytes: int) -> Path:
    """The folder; returns the big foreign transcript. mtimes are spread so that newest-first has an order."""
    project.mkdir(parents=True)
    bodies = {False: transcript_body(file_bytes, False), True: transcript_body(file_bytes, True)}
    now = time.time()
    for i in range(foreign + named):
        is_named = i < named
        sid = f"{i:08d}-0000-4000-8000-000000000000"
        path = project / f"{sid}.jsonl"
        path.write_bytes(bodies[is_named].replace(b"@@SID@@", sid.encode()).replace(b"@@NAME@@", f"sess-{i}".encode()))
        os.utime(path, (now - i, now - i))
    big = project / "ffffffff-0000-4000-8000-000000000000.jsonl"
    if big_bytes:
        chunk = transcript_body(8 * MiB, False).replace(b"@@SID@@", b"agent")
        with open(big, "wb") as f:
            for _ in range(max(1, big_bytes // len(chunk))):
                f.write(chunk)
    return big


def grow(path: Path) -> None:
    """One more line of the agent's own session (an assistant entry of ~1 KB)."""
    with open(path, "ab") as f:
        f.write(_line({"type": "assistant", "timestamp": "2026-11-30T12:00:00Z", "message": {
            "id": f"g{time.monotonic_ns()}", "model": "claude-opus-5-5", "role": "assistant",
            "content": [{"type": "text", "text": "y" * 1000}], "stop_reason": "end_turn"}}))


def listdir_and_stat(project: Path) -> float:
    started = time.perf_counter()
    for name in os.listdir(project):
        os.stat(project / name)
    return time.perf_counter() - started


def _call(conn: McpConnection, tool: str, args: dict) -> float:
    started = time.perf_counter()
    result = conn.call(tool, args)
    elapsed = time.perf_counter() - started
    if result.get("isError"):
        raise RuntimeError(f"{tool} {args}: {result['content'][0]['text'].strip()}")
    return elapsed


def _calls(root: Path, prompt_file: Path):
    """tool -> (name of the row, arguments for the i-th call): every call a look-up in the crowded folder."""
    return {
        "status()": ("status", lambda i: {}),
        "status(name)": ("status", lambda i: {"name": f"sess-{7 + i % 40}"}),
        "start": ("start", lambda i: {"name": f"new-{time.monotonic_ns()}", "prompt_file": str(prompt_file)}),
        "continue": ("continue", lambda i: {"name": f"sess-{i % 50}", "prompt": "go on"}),
    }


def _folder(root: Path, foreign: int, big_bytes: int) -> tuple[Path, Path, Path]:
    """(home, workdir, the big transcript) of a generated folder with the 50 named sessions."""
    home, work = root / "home", root / "work"
    work.mkdir(parents=True)
    project = home / ".claude" / "projects" / project_slug(os.path.realpath(work))
    return home, work, build_folder(project, foreign, 50, MiB, big_bytes)


class _Scene:
    """What every daemon of `lookups` runs on: the crowded folder and the lean one, the stand-in claude, the
    prompt, and one state directory, as a daemon restarted by systemd keeps its own."""

    def __init__(self, root: Path):
        self.root = root
        started = time.perf_counter()
        self.home, self.work, self.big = _folder(root / "crowded", 250, 50 * MiB)
        self.lean_home, self.lean_work, _ = _folder(root / "lean", 0, 0)
        self.built_s = time.perf_counter() - started
        self.claude = root / "claude"
        self.claude.write_text(CLAUDE_STAND_IN)
        self.claude.chmod(0o755)
        prompt_file = root / "prompt.md"
        prompt_file.write_text("You are a benchmark subagent.\n")
        self.calls = _calls(root, prompt_file)
        self.state = root / "state"

    def daemon(self, n: int, lean: bool = False) -> Daemon:
        workdir, home, state = ((self.lean_work, self.lean_home, self.root / "state-lean") if lean
                                else (self.work, self.home, self.state))
        argv = [str(VENV_BIN / "hive-subagent-daemon"), "--claude-bin", str(self.claude), "--workdir", str(workdir),
                "--max-running", "64", "--state-dir", str(state)]
        return Daemon(argv, self.root / f"daemon-{n}", env={"HOME": str(home)})


def lookups(ctx):
    scene = _Scene(ctx.workdir / "sessions")
    n = ctx.reps(30, 8)
    project = scene.big.parent
    base_med, base_p99 = percentiles([listdir_and_stat(project) for _ in range(n)])
    lean, lean_start = _lean_medians(scene, n)
    rows = [_first_start_row(scene, base_med, lean_start)]
    for k, (label, (tool, args)) in enumerate(scene.calls.items()):
        rows += _restart_rows(scene, 2 + k, label, tool, args, n, base_med, lean[label], lean_start)
    rows.append(Row("sessions", "  baseline: os.listdir + stat of the folder", "ms", base_med, base_p99, n,
                    note=f"301 files, {sum(p.stat().st_size for p in project.iterdir()) / MiB:.0f} MiB, "
                         f"both folders built in {scene.built_s:.1f} s"))
    shutil.rmtree(scene.root, ignore_errors=True)
    return rows


def _lean_medians(scene: _Scene, n: int) -> tuple[dict[str, float], float]:
    """Same verbs, a folder holding only the 50 named transcripts: what the 251 foreign ones add shows as the
    ratio. (median of each verb, seconds from start to ready)"""
    lean = {}
    began = time.perf_counter()
    with scene.daemon(0, lean=True) as d:
        lean_start = time.perf_counter() - began
        conn = McpConnection(d.port)
        for label, (tool, args) in scene.calls.items():
            lean[label] = percentiles([_call(conn, tool, args(i)) for i in range(n)])[0]
        conn.close()
    return lean, lean_start


def _first_start_row(scene: _Scene, base_med: float, lean_start: float) -> Row:
    began = time.perf_counter()
    with scene.daemon(1) as d:  # the first start ever on this folder: nothing saved yet
        cold_start = time.perf_counter() - began
        conn = McpConnection(d.port)
        cold = _call(conn, "status", {})
        conn.close()
    return Row("sessions", "status(): first call on the first daemon start ever on this folder", "ms", cold * 1000,
               None, 1, "listdir+stat", base_med, target=f"< {TARGET_MS:.0f} ms", ok=cold * 1000 < TARGET_MS,
               note=f"nothing saved yet: the daemon read the 50 named transcripts before it said ready "
                    f"(start to ready {cold_start * 1000:.0f} ms; lean folder {lean_start * 1000:.0f} ms)")


def _restart_rows(scene: _Scene, n_daemon: int, label: str, tool: str, args, n: int, base_med: float,
                  lean_med: float, lean_start: float) -> list[Row]:
    """One verb on a restarted daemon (the index saved by the last one is checked and read on): its first call,
    repeated calls, then calls with the big transcript grown before each."""
    began = time.perf_counter()
    with scene.daemon(n_daemon) as d:
        restart = time.perf_counter() - began
        conn = McpConnection(d.port)
        first = _call(conn, tool, args(0))
        steady = [_call(conn, tool, args(i)) for i in range(1, n)]
        growing = []
        for i in range(n):
            grow(scene.big)
            growing.append(_call(conn, tool, args(n + i)))
        conn.close()
    med, p99 = percentiles([first, *steady])
    worst = max(first, *steady) * 1000
    g_med, g_p99 = percentiles(growing)
    return [
        Row("sessions", f"{label}: first call after a restart, then repeated", "ms", med, p99, n,
            "50 named only", lean_med, target=f"< {TARGET_MS:.0f} ms each", ok=worst < TARGET_MS,
            note=f"first {first * 1000:.1f} ms, worst {worst:.1f} ms; {med / base_med:.1f}x listdir+stat; "
                 f"restart to ready {restart * 1000:.0f} ms (lean folder {lean_start * 1000:.0f} ms)"),
        Row("sessions", f"{label}: the 50 MB transcript grew before each", "ms", g_med, g_p99, n,
            "50 named only", lean_med, target=f"< {GROWING_TARGET_MS:.0f} ms each",
            ok=max(growing) * 1000 < GROWING_TARGET_MS,
            note=f"worst {max(growing) * 1000:.1f} ms; {g_med / base_med:.1f}x listdir+stat"),
    ]


def summaries_memory(ctx):
    """The index's memory for 1,000 transcripts (5 in 6 foreign, like the folder above), after status()."""
    root = ctx.workdir / "sessions-memory"
    work = root / "work"
    work.mkdir(parents=True)
    store = SessionStore(work, {"HOME": str(root / "home")})
    build_folder(store.project_dir, 833, 167, 128 * 1024, 0)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    listed = store.list()
    elapsed = time.perf_counter() - started
    del listed
    held = (tracemalloc.get_traced_memory()[0] - before) / MiB
    tracemalloc.stop()
    entries = store.index.entries()
    shutil.rmtree(root, ignore_errors=True)
    return [Row("sessions", "summaries' memory, 1,000 transcripts (167 named)", "MiB", held, None, 1,
                target=f"< {MEMORY_TARGET_MIB:.0f} MiB", ok=held < MEMORY_TARGET_MIB,
                note=f"{entries} files indexed; first status() in-process took {elapsed * 1000:.0f} ms "
                     "under tracemalloc")]


BENCHMARKS = [lookups, summaries_memory]
