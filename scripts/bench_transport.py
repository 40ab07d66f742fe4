"""Transport: a trivial tools/call round trip over loopback, ours against the official SDK's own server."""

import os
import socket
import sys
import threading
import time

from bench_support import REPO, Daemon, McpConnection, Row, percentiles, timed

OURS = [sys.executable, str(REPO / "tests" / "kit" / "echo_server.py")]
SDK = [sys.executable, str(REPO / "scripts" / "bench_sdk_server.py")]


def _round_trips(port: int, n: int) -> list[float]:
    conn = McpConnection(port)
    timed(lambda: conn.call("echo", {"text": "hi"}), 50)  # warm-up: imports, first connection
    samples = timed(lambda: conn.call("echo", {"text": "hi"}), n)
    conn.close()
    return samples


def tools_call_round_trip(ctx):
    n = ctx.reps(2000, 300)
    with Daemon(OURS, ctx.workdir / "ours") as ours, Daemon(SDK, ctx.workdir / "sdk") as sdk:
        # Interleave halves so a burst of machine noise hits both sides alike.
        a1, b1 = _round_trips(ours.port, n // 2), _round_trips(sdk.port, n // 2)
        a2, b2 = _round_trips(ours.port, n // 2), _round_trips(sdk.port, n // 2)
    ours_med, ours_p99 = percentiles(a1 + a2)
    sdk_med, sdk_p99 = percentiles(b1 + b2)
    return [
        Row("transport", "tools/call round trip (echo)", "ms", ours_med, ours_p99, n, "SDK server", sdk_med,
            target="median < 2 ms and <= SDK", ok=ours_med < 2.0 and ours_med <= sdk_med),
        Row("transport", "  baseline: SDK streamable-HTTP server", "ms", sdk_med, sdk_p99, n),
    ]


def _throughput(port: int, clients: int, seconds: float) -> tuple[float, list[float]]:
    stop = time.monotonic() + seconds
    samples: list[float] = []
    lock = threading.Lock()

    def client():
        conn = McpConnection(port)
        mine = []
        while time.monotonic() < stop:
            t = time.perf_counter()
            conn.call("echo", {"text": "hi"})
            mine.append(time.perf_counter() - t)
        conn.close()
        with lock:
            samples.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(samples) / (time.monotonic() - started), samples


def concurrent_clients(ctx):
    seconds = 1.0 if ctx.quick else 3.0
    rows = []
    with Daemon(OURS, ctx.workdir / "ours-c") as ours, Daemon(SDK, ctx.workdir / "sdk-c") as sdk:
        for clients in (1, 8, 64):
            ours_rate, ours_s = _throughput(ours.port, clients, seconds)
            sdk_rate, _ = _throughput(sdk.port, clients, seconds)
            med, p99 = percentiles(ours_s)
            rows.append(Row("transport", f"throughput, {clients} clients", "calls/s", ours_rate, None, len(ours_s),
                            "SDK server", sdk_rate, note=f"ours: median {med:.2f} ms, p99 {p99:.2f} ms"))
    return rows


def _connection_pair(server: socket.socket) -> tuple[socket.socket, socket.socket]:
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    return client, accepted


def _per_connection(server: socket.socket, n: int, check) -> list[float]:
    """`check(accepted)` timed once per fresh loopback connection (connecting and closing are not timed)."""
    samples = []
    for _ in range(n):
        client, accepted = _connection_pair(server)
        t = time.perf_counter()
        check(accepted)
        samples.append(time.perf_counter() - t)
        client.close()
        accepted.close()
    return samples


def caller_uid_check(ctx):
    """What knowing the caller costs each new connection (Claude Code reconnects every turn): the uid lookup
    the daemons do at accept, beside a new loopback connection itself and the /proc/net/tcp fallback."""
    from common.serving.connection_guard import ConnectionPolicy
    from common.serving.peer_uid import peer_uid_proc

    n = ctx.reps(2000, 300)
    policy = ConnectionPolicy(frozenset({os.geteuid()}), 5.0)
    with socket.create_server(("127.0.0.1", 0)) as server:
        def connect_and_close():
            for sock in _connection_pair(server):
                sock.close()

        _per_connection(server, 50, policy.refusal)  # warm-up
        checks, connects = [], []
        for _ in range(2):  # interleaved halves, as above
            checks += _per_connection(server, n // 2, policy.refusal)
            connects += timed(connect_and_close, n // 2)
        proc = _per_connection(server, max(20, n // 20), lambda s: peer_uid_proc(s.getsockname(), s.getpeername()))
    med, p99 = percentiles(checks)
    base_med, base_p99 = percentiles(connects)
    proc_med, proc_p99 = percentiles(proc)
    return [
        Row("transport", "caller uid check per new connection (sock_diag)", "ms", med, p99, len(checks),
            "new loopback connection", base_med, target="median < 0.2 ms", ok=med < 0.2),
        Row("transport", "  baseline: connect + accept + close", "ms", base_med, base_p99, len(connects)),
        Row("transport", "  fallback: the same lookup in /proc/net/tcp", "ms", proc_med, proc_p99, len(proc),
            note="used only where netlink is refused"),
    ]


BENCHMARKS = [tools_call_round_trip, caller_uid_check, concurrent_clients]
