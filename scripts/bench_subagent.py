"""Subagent: what the daemon adds to a claude turn, measured side by side with the same `claude -p` run directly.

Both run the real claude CLI (the one scripts/test installs) against the Messages API mock of the tests, with
a turn that holds the model call for a fixed time, so the turn's wall time is dominated by claude itself and
the daemon's share shows as the difference. Runs alternate direct/daemon so machine noise hits both alike.
"""

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_support import REPO, VENV_BIN, Daemon, McpConnection, Row

sys.path.insert(0, str(REPO / "tests" / "subagent"))
from mock_messages_api import MockMessagesServer, claude_env  # noqa: E402

CLAUDE = REPO / ".cache" / "npm" / "node_modules" / ".bin" / "claude"
HOLD_SECONDS = 1.0  # the mock holds each model call this long: a turn of ~1.5 s


def _direct_turn(workdir: Path, env: dict, prompt_file: Path, name: str, prompt: str) -> float:
    argv = [str(CLAUDE), "-p", "--name", name, "--append-system-prompt-file", str(prompt_file),
            "--dangerously-skip-permissions", "--strict-mcp-config", "--output-format", "stream-json", "--verbose"]
    started = time.perf_counter()
    proc = subprocess.run(argv, input=prompt.encode(), cwd=workdir, env=env, capture_output=True, timeout=120)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0 or b'"subtype":"success"' not in proc.stdout.replace(b" ", b""):
        raise RuntimeError(f"direct claude run failed: rc={proc.returncode} {proc.stderr[-300:]!r}")
    return elapsed


def _daemon_turn(conn: McpConnection, prompt_file: Path, name: str, prompt: str) -> tuple[float, float]:
    """(wall time of the turn as the daemon's caller sees it, seconds from spawn to start's answer)."""
    started = time.perf_counter()
    result = conn.call("start", {"name": name, "prompt_file": str(prompt_file), "trigger": prompt})
    if result.get("isError"):
        raise RuntimeError(f"start failed: {result['content'][0]['text']}")
    spawn_to_answer = result["structuredContent"]["elapsed_s"]
    while True:  # a status call is ~1 ms: this polling costs the measurement at most a few ms
        status = conn.call("status", {"name": name})["structuredContent"]
        if not status["running"]:
            break
        time.sleep(0.003)
    elapsed = time.perf_counter() - started
    if status["last_turn"]["outcome"] != "completed":
        raise RuntimeError(f"daemon turn ended {status['last_turn']}")
    return elapsed, spawn_to_answer


def turn_overhead(ctx):
    if not CLAUDE.exists():
        return [Row("subagent", "turn wall time", "ms", note=f"claude CLI missing at {CLAUDE}: run scripts/test")]
    n = ctx.reps(10, 4)
    root = ctx.workdir / "subagent"
    workdir = root / "work"
    workdir.mkdir(parents=True)
    prompt_file = root / "prompt.md"
    prompt_file.write_text("You are a benchmark subagent.\n")
    mock = MockMessagesServer().start()
    env = claude_env(mock.url, root / "scratch")
    prompt = f"MOCK:sleep={HOLD_SECONDS} MOCK:reply=done"
    direct, via_daemon, answers = [], [], []
    try:
        argv = [str(VENV_BIN / "hive-subagent-daemon"), "--claude-bin", str(CLAUDE), "--workdir", str(workdir),
                "--state-dir", str(root / "state"), "--max-running", "1"]
        with Daemon(argv, root / "daemon", env=env) as daemon:
            conn = McpConnection(daemon.port)
            _direct_turn(workdir, env, prompt_file, "warm-direct", prompt)  # first runs pay for cold caches
            _daemon_turn(conn, prompt_file, "warm-daemon", prompt)
            for i in range(n):
                direct.append(_direct_turn(workdir, env, prompt_file, f"direct-{i}", prompt))
                wall, answer = _daemon_turn(conn, prompt_file, f"daemon-{i}", prompt)
                via_daemon.append(wall)
                answers.append(answer)
            conn.close()
    finally:
        mock.stop()
    d_med, b_med = statistics.median(via_daemon) * 1000, statistics.median(direct) * 1000
    overhead = (d_med - b_med) / b_med * 100
    answer_med, answer_max = statistics.median(answers) * 1000, max(answers) * 1000
    return [
        Row("subagent", "turn wall time via the daemon", "ms", d_med, max(via_daemon) * 1000, n, "claude -p direct", b_med,
            target="< 2% over direct", ok=overhead < 2.0, note=f"overhead {overhead:+.1f}%"),
        Row("subagent", "  baseline: the same claude -p run directly", "ms", b_med, max(direct) * 1000, n),
        Row("subagent", "start: spawn to answer", "ms", answer_med, answer_max, n, target="< 300 ms", ok=answer_max < 300.0,
            note="includes --confirm-wait (0.2 s) for claude's init line"),
    ]


BENCHMARKS = [turn_overhead]
