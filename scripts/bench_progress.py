"""Progress on a waiting call: what a progressToken costs a call that ends at once, and how soon a
task's output line reaches the client as a progress event."""

import http.client
import json
import re
import statistics
import time

from bench_support import VENV_BIN, Daemon, McpConnection, Row, percentiles, timed

DAEMON = [str(VENV_BIN / "hive-bash-daemon")]
TOKEN_META = {"progressToken": "bench"}


def round_trip_with_and_without_token(ctx):
    """run("true", wait_seconds=30) through the lean client, with and without a progressToken, interleaved: a
    call that ends within the wait's first second has no progress to tell and is the same JSON answer."""
    n = ctx.reps(400, 60)
    with Daemon(DAEMON, ctx.workdir / "progress-rt", env={"HIVE_BASH_KEEP_TASKS": "100000"}) as d:
        plain, token = McpConnection(d.port), McpConnection(d.port)
        token.meta = {**token.meta, **TOKEN_META}
        calls = {"plain": lambda: plain.call("run", {"cmd": "true", "wait_seconds": 30}),
                 "token": lambda: token.call("run", {"cmd": "true", "wait_seconds": 30})}
        for fn in calls.values():
            timed(fn, 30)  # warm-up
        samples: dict[str, list[float]] = {"plain": [], "token": []}
        for _ in range(10):
            for name, fn in calls.items():
                samples[name] += timed(fn, n // 10)
        plain.close()
        token.close()
    (tmed, tp99), (pmed, pp99) = percentiles(samples["token"]), percentiles(samples["plain"])
    return [Row("progress", 'run("true", wait_seconds=30) with a progressToken', "ms", tmed, tp99, n, "no token", pmed,
                target="within noise (<= 1.05x)", ok=tmed <= 1.05 * pmed),
            Row("progress", "  baseline: the same call without a token", "ms", pmed, pp99, n)]


def _stream_events(port: int, arguments: dict):
    """One streamed tools/call; yields (receipt time, message) per SSE event as it arrives."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            **TOKEN_META}
    conn.request("POST", "/mcp", body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "run", "arguments": arguments, "_meta": meta}}), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "run"})
    response = conn.getresponse()
    try:
        while line := response.readline():
            if line.startswith(b"data: "):
                yield time.time(), json.loads(line[6:])
    finally:
        conn.close()


def line_to_progress_event(ctx):
    """From a task's output line (its $EPOCHREALTIME, written 1.5 s after the one before: after a quiet second)
    to the progress event that carries it, in the client."""
    lines, runs = (19, ctx.reps(3, 1))
    cmd = f'for i in $(seq {lines}); do sleep 1.5; echo "line $EPOCHREALTIME"; done'
    delays = []
    with Daemon(DAEMON, ctx.workdir / "progress-delay") as d:
        for _ in range(runs):
            told = set()
            for received, message in _stream_events(d.port, {"cmd": cmd, "wait_seconds": 30}):
                found = re.search(r'last: "line (\d+\.\d+)"', message.get("params", {}).get("message", ""))
                if message.get("method") == "notifications/progress" and found and found.group(1) not in told:
                    told.add(found.group(1))
                    delays.append(received - float(found.group(1)))
    med, p99 = percentiles(delays)
    p95 = sorted(delays)[min(len(delays) - 1, int(len(delays) * 0.95))] * 1000
    return [Row("progress", "output line -> progress event", "ms", med, p99, len(delays),
                target="p95 < 150 ms", ok=p95 < 150,
                note=f"p95 {p95:.1f} ms, mean {statistics.mean(delays) * 1000:.1f} ms")]


BENCHMARKS = [round_trip_with_and_without_token, line_to_progress_event]
