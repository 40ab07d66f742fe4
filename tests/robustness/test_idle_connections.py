"""Idle connections of the daemon's own uid against the real daemons: a few hundred connections that never send
a byte would fill waitress's connection limit, and every caller would wait for the 120 s channel timeout. A new
connection must bring a whole first request within --first-request-timeout,
and idle connections make room when the limit is near, those never served first and then the oldest; a long
answer is never cut."""

import json
import os
import resource
import socket
import time
from urllib.parse import urlsplit

import anyio
import pytest
from daemon_harness import start_daemon, wait_until
from kit.daemons_kit import BASH_DAEMON, BIN
from kit.robust_kit import META, MODERN, call_tool_raw, host_of, tool_result
from mcp.client.client import Client

IDLERS = 300  # above the default --connection-limit (200)


@pytest.fixture(autouse=True)
def enough_descriptors():
    """300 sockets here and in the daemon (which inherits the limit): raise a low soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2 * IDLERS + 100:
        if hard != resource.RLIM_INFINITY and hard < 2 * IDLERS + 100:
            pytest.skip(f"{IDLERS} idle connections need more file descriptors than RLIMIT_NOFILE allows ({hard})")
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard) if hard != resource.RLIM_INFINITY else 4096, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _argv(which: str, state, *extra: str) -> list[str]:
    if which == "bash":
        return [str(BASH_DAEMON), "--state-dir", str(state), *extra]
    return [str(BIN / "hive-subagent-daemon"), "--state-dir", str(state), "--claude-bin", "/bin/true", *extra]


def _tool(which: str) -> tuple[str, dict]:
    return ("list", {}) if which == "bash" else ("status", {})


def _sockets_of(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return count


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname, parts.port), timeout=30)


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the daemon closed this connection (EOF or a reset), without waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        sock.setblocking(True)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["bash", "subagent"])
def test_hundreds_of_idle_connections_leave_a_new_call_answered(tmp_path, which):
    # A first-request timeout far beyond the test: only making room near the limit can let the call in.
    d = start_daemon(_argv(which, tmp_path / "state", "--first-request-timeout", "600"), tmp_path)
    idlers: list[socket.socket] = []
    try:
        for _ in range(IDLERS):
            idlers.append(_connect(d.url))
        # The daemon has taken them all from the backlog once it holds about the limit and the listener.
        wait_until(lambda: _sockets_of(d.proc.pid) >= 150, 30, "the daemon to accept the idle connections")
        tool, args = _tool(which)
        began = time.monotonic()
        result = tool_result(call_tool_raw(d.url, tool, args, timeout=30))
        took = time.monotonic() - began
        assert not result["isError"], result
        assert took < 30, took
        print(f"a call behind {IDLERS} idle connections was answered in {took:.3f}s")
        closed = sum(_closed_by_peer(s) for s in idlers)
        assert closed >= IDLERS - 200, f"only {closed} idle connections were closed"
        assert _closed_by_peer(idlers[0]) and not _closed_by_peer(idlers[-1]), "the oldest go first"
        assert "idle connection(s) closed to make room" in d.log(), d.log()[-2000:]
    finally:
        for s in idlers:
            s.close()
        d.stop()


def _tools_call(url: str, tool: str, arguments: dict) -> bytes:
    """One keep-alive tools/call request's bytes (robust_kit's requests close the connection)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments, "_meta": META}}).encode()
    return (f"POST /mcp HTTP/1.1\r\nHost: {host_of(url)}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\n"
            f"Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


def _read_response(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))
    while len(rest) < length:
        rest += sock.recv(65536)
    return head + b"\r\n\r\n" + rest


@pytest.mark.slow
def test_a_silent_connection_is_closed_and_a_served_one_kept(tmp_path):
    d = start_daemon(_argv("bash", tmp_path / "state", "--first-request-timeout", "1"), tmp_path)
    try:
        served = _connect(d.url)
        served.sendall(_tools_call(d.url, "list", {}))
        assert _read_response(served).startswith(b"HTTP/1.1 200 ")
        silent = _connect(d.url)
        began = time.monotonic()
        assert silent.recv(1) == b"", "a silent connection was answered"  # blocks until the daemon closes it
        assert time.monotonic() - began < 30  # the socket's own timeout would raise first anyway
        partial = _connect(d.url)
        partial.sendall(_tools_call(d.url, "list", {})[:40])
        answer = partial.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408 ") and b"first request did not arrive within 1s" in answer, answer
        # The connection that had a request answered is a client's keep-alive connection: it stays.
        assert not _closed_by_peer(served)
        served.sendall(_tools_call(d.url, "list", {}))
        assert _read_response(served).startswith(b"HTTP/1.1 200 ")
        wait_until(lambda: "connection(s) sent no whole request within 1s" in d.log(), 10, "the log line")
        for s in (served, silent, partial):
            s.close()
    finally:
        d.stop()



def test_near_the_limit_connections_never_served_go_before_a_served_keep_alive_one(tmp_path):
    """The served connection is the oldest and as idle as the rest, yet a client's keep-alive connection is
    kept: only never-served ones are closed to make room (connection_guard.make_room)."""
    d = start_daemon(_argv("bash", tmp_path / "state", "--first-request-timeout", "600", "--connection-limit", "20"),
                     tmp_path)
    idlers: list[socket.socket] = []
    try:
        served = _connect(d.url)
        served.sendall(_tools_call(d.url, "list", {}))
        assert _read_response(served).startswith(b"HTTP/1.1 200 ")
        for _ in range(20):  # past the 18 open sockets at which room is made (a tenth of the limit kept free)
            idlers.append(_connect(d.url))
        wait_until(lambda: _closed_by_peer(idlers[0]) or _closed_by_peer(served), 10, "room to be made")
        assert not _closed_by_peer(served), "the served keep-alive connection was closed to make room"
        served.sendall(_tools_call(d.url, "list", {}))
        assert _read_response(served).startswith(b"HTTP/1.1 200 ")
    finally:
        for s in idlers:
            s.close()
        d.stop()

@pytest.mark.slow
def test_a_long_answer_is_not_cut_by_the_first_request_timeout(tmp_path):
    """A request being served (an inline wait, later a streamed answer) is not idle, however long it takes."""
    d = start_daemon(_argv("bash", tmp_path / "state", "--first-request-timeout", "1"), tmp_path)
    try:
        conn = _connect(d.url)
        conn.sendall(_tools_call(d.url, "run", {"cmd": "sleep 3; echo slow-ok", "wait_seconds": 10}))
        answer = _read_response(conn)
        assert answer.startswith(b"HTTP/1.1 200 ") and b"slow-ok" in answer, answer
        conn.close()
    finally:
        d.stop()


@pytest.mark.slow
def test_a_streamed_answer_is_not_cut_by_the_first_request_timeout(tmp_path):
    """A streamed (SSE) answer that sends progress for longer than --first-request-timeout: its request is
    being served the whole time, so the connection is never idle (the official SDK client, both eras)."""
    d = start_daemon(_argv("bash", tmp_path / "state", "--first-request-timeout", "1"), tmp_path)
    try:
        async def call(mode):
            seen = []

            async def on_progress(progress, total, message):
                seen.append(message)

            async with Client(d.url, mode=mode) as client:
                result = await client.call_tool("run", {"cmd": "for i in 1 2 3; do echo tick $i; sleep 1; done",
                                                        "wait_seconds": 10}, progress_callback=on_progress)
            return seen, result

        for mode in ("2026-07-28", "legacy"):
            seen, result = anyio.run(call, mode)
            assert result.is_error is False and "tick 3" in result.content[0].text, result
            assert seen, "no progress was streamed"
        assert "connection(s) sent no whole request" not in d.log()
    finally:
        d.stop()
