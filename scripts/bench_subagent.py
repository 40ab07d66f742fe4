"""Subagent: what the daemon adds to a claude turn, measured side by side with the same `claude -p` run directly.

Both run the real claude CLI (the one scripts/test installs) against the Messages API mock of the tests, with
a turn that holds the model call for a fixed time, so the turn's wall time is dominated by claude itself and
the daemon's share shows as the difference. Runs alternate direct/daemon so machine noise hits both alike.
"""

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_support import REPO, VENV_BIN, Daemon, McpConnection, Row

sys.path.insert(0, str(REPO / "tests"))  # the tests' own Messages API mock, as tests/kit holds it
from kit.mock_messages_api import MockMessagesServer, claude_env

CLAUDE = REPO / ".cache" / "npm" / "node_modules" / ".bin" / "claude"
HOLD_SECONDS = 2.0  # the mock holds each model call this long: a turn of ~2.4 s (real turns run far longer)


def _direct_turn(workdir: Path, env: dict, prompt_file: Path, name: str, prompt: str) -> float:
    argv = [str(CLAUDE), "-p", "--name", name, "--append-system-prompt-file", str(prompt_file),
            "--dangerously-skip-permissions", "--strict-mcp-config", "--output-format", "stream-json", "--verbose"]
    started = time.perf_counter()
    proc = subprocess.run(argv, input=prompt.encode(), cwd=workdir, env=env, capture_output=True, timeout=120)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0 or b'"subtype":"success"' not in proc.stdout.replace(b" ", b""):
        raise RuntimeError(f"direct claude run failed: rc={proc.returncode} {proc.stderr[-300:]!r}")
    return elapsed


class Sink:
    """The reference harness socket (`hive-todos serve --json`); records when each todo arrives, so the
    daemon's turn is timed as the agent sees it (start call -> completion todo), with no polling load."""

    def __init__(self, folder: Path):
        self.path = folder / "h.sock"
        self.arrived: dict[str, float] = {}
        self.turn_seconds: dict[str, float] = {}  # the daemon's own spawn-to-end time of each turn
        self.cond = threading.Condition()
        self.proc = subprocess.Popen([sys.executable, "-m", "common.todos.cli", "serve", "--socket",
                                      str(self.path), "--json"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        threading.Thread(target=self._read, daemon=True).start()
        with self.cond:
            if not self.cond.wait_for(lambda: "serving" in self.arrived, 20):
                raise RuntimeError("hive-todos serve did not start")

    def _read(self):
        for line in self.proc.stdout:
            event = json.loads(line)
            with self.cond:
                if event.get("event") == "serving":
                    self.arrived["serving"] = time.perf_counter()
                elif event.get("event") == "upsert":
                    self.arrived[event["key"]] = time.perf_counter()
                    self.turn_seconds[event["key"]] = event["data"]["outcome"]["duration_s"]
                self.cond.notify_all()

    def wait(self, key: str, seconds: float = 120.0) -> float:
        with self.cond:
            if not self.cond.wait_for(lambda: key in self.arrived, seconds):
                raise RuntimeError(f"no todo for {key} within {seconds}s")
            return self.arrived[key]

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)


def _daemon_turn(conn: McpConnection, sink: Sink, prompt_file: Path, name: str, prompt: str) -> tuple[float, float]:
    """(wall time as the agent sees it: start call to completion todo; spawn to start's answer; the daemon's share)."""
    started = time.perf_counter()
    result = conn.call("start", {"name": name, "prompt_file": str(prompt_file), "trigger": prompt})
    if result.get("isError"):
        raise RuntimeError(f"start failed: {result['content'][0]['text']}")
    spawn_to_answer = result["structuredContent"]["elapsed_s"]
    elapsed = sink.wait(name) - started
    status = conn.call("status", {"name": name})["structuredContent"]
    if status["last_turn"]["outcome"] != "completed":
        raise RuntimeError(f"daemon turn ended {status['last_turn']}")
    return elapsed, spawn_to_answer, elapsed - sink.turn_seconds[name]


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
    direct, via_daemon, answers, shares = [], [], [], []
    sink = Sink(Path(tempfile.mkdtemp(prefix="hb-", dir="/tmp")))  # a short path: Unix socket names are limited
    try:
        argv = [str(VENV_BIN / "hive-subagent-daemon"), "--claude-bin", str(CLAUDE), "--workdir", str(workdir),
                "--state-dir", str(root / "state"), "--max-running", "1", "--agent-socket", str(sink.path)]
        with Daemon(argv, root / "daemon", env=env) as daemon:
            conn = McpConnection(daemon.port)
            _direct_turn(workdir, env, prompt_file, "warm-direct", prompt)  # first runs pay for cold caches
            _daemon_turn(conn, sink, prompt_file, "warm-daemon", prompt)
            for i in range(n):
                direct.append(_direct_turn(workdir, env, prompt_file, f"direct-{i}", prompt))
                wall, answer, share = _daemon_turn(conn, sink, prompt_file, f"daemon-{i}", prompt)
                via_daemon.append(wall)
                answers.append(answer)
                shares.append(share)
            conn.close()
    finally:
        mock.stop()
        sink.close()
        shutil.rmtree(sink.path.parent, ignore_errors=True)
    d_med, b_med = statistics.median(via_daemon) * 1000, statistics.median(direct) * 1000
    # The median of the paired differences (each daemon turn ran right after its direct twin): claude's own
    # start-up varies by ~100 ms run to run, which a difference of medians would mistake for overhead.
    overhead = statistics.median(d - b for d, b in zip(via_daemon, direct, strict=True)) * 1000 / b_med * 100
    answer_med, answer_max = statistics.median(answers) * 1000, max(answers) * 1000
    return [
        Row("subagent", "turn wall time via the daemon (start call to todo)", "ms",
            d_med, max(via_daemon) * 1000, n, "claude -p direct", b_med,
            target="< 2% over direct", ok=overhead < 2.0, ratio=1 + overhead / 100,
            note=f"overhead {overhead:+.1f}% (median of paired differences)"),
        Row("subagent", "  baseline: the same claude -p run directly", "ms", b_med, max(direct) * 1000, n),
        Row("subagent", "  the daemon's own share of a turn", "ms",
            statistics.median(shares) * 1000, max(shares) * 1000, n,
            note="wall time minus claude's lifetime as the daemon timed it: HTTP call, spawn, "
                 "exit handling, todo delivery"),
        Row("subagent", "start: spawn to answer", "ms",
            answer_med, answer_max, n, target="< 300 ms", ok=answer_max < 300.0,
            note="includes --confirm-wait (0.2 s) for claude's init line"),
    ]


BENCHMARKS = [turn_overhead]
