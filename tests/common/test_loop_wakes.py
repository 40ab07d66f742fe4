"""The serving loop is woken at a request's end only when it has something new to do (common/serving/stream_channel.py,
`quiet_request_ends`), and does not spin on a connection it could not write to (its `writable`: while the
request thread sends, or a running request has a few bytes buffered): the daemons' own waitress server, in
this process so that its trigger and its turns can be counted, driven over real keep-alive sockets. A wake
left out where one was needed would leave an answer or a close waiting for the loop's 1 s select timeout;
each case checks that the loop was woken and the exchange done."""

import contextlib
import http.client
import socket
import threading

import pytest
from daemon_harness import wait_until
from waitress import wasyncore

from common.config import ServerSettings
from common.serving.serve import _create_server
from common.serving.stream_channel import StreamingChannel

# Above send_bytes (common/serving/serve.py): the request thread sends it whole.
LONG_BODY = b'{"jsonrpc":"2.0","id":1,"result":{"text":"' + b"x" * 400 + b'"}}'
# More than a loopback socket takes while its reader reads nothing (4 MiB tcp_wmem at most, 128 KiB of
# receive window), less than waitress's 16 MiB outbuf_high_watermark (above it the thread would wait for the
# loop to drain it): the request thread's send leaves most of it for the loop.
HUGE_BODY = b"y" * (12 * 1024 * 1024)
# /trickle writes its header and TRICKLE_HEAD (below send_bytes: left in the buffer), waits for the test's
# gate, then the rest.
TRICKLE_HEAD, TRICKLE_REST = b"t" * 10, b"u" * 400
_trickle_gates: list[threading.Event] = []


def _app(environ, start_response):
    """/long: a body the request thread sends whole; /empty: 202 without a body (its header waits for the loop)."""
    if environ["PATH_INFO"] == "/empty":
        start_response("202 Accepted", [("Content-Length", "0")])
        return [b""]
    if environ["PATH_INFO"] == "/trickle":
        write = start_response("200 OK", [("Content-Length", str(len(TRICKLE_HEAD) + len(TRICKLE_REST)))])
        write(TRICKLE_HEAD)
        assert _trickle_gates[0].wait(10), "the test never opened the gate"
        return [TRICKLE_REST]
    if environ["PATH_INFO"] == "/huge":
        start_response("200 OK", [("Content-Length", str(len(HUGE_BODY)))])
        return [HUGE_BODY]
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(LONG_BODY)))])
    return [LONG_BODY]


@pytest.fixture
def served():
    """(server, pulls, turns): the server runs its loop in a thread; `pulls` counts the trigger's physical
    pulls, `turns` the loop's turns (one select each)."""
    yield from _serving(select_timeout=1.0)


@pytest.fixture
def served_patiently():
    """`served` with a select that waits a minute: a wake left out hangs the exchange (its 5 s timeout fails the
    test), where the daemons' 1 s timeout only delays it."""
    yield from _serving(select_timeout=60.0)


def _serving(select_timeout: float):
    server = _create_server(_app, ServerSettings(host="127.0.0.1", port=0, threads=2))
    pulls = [0]
    real = server.trigger.pull_trigger

    def counted(thunk=None):
        pulls[0] += 1
        return real(thunk)

    server.trigger.pull_trigger = counted
    stop = threading.Event()
    turns = [0]

    def serve() -> None:  # waitress's own loop, one turn at a time, so that the fixture can end it
        while not stop.is_set():
            wasyncore.loop(timeout=select_timeout, map=server._map, count=1)
            turns[0] += 1

    loop = threading.Thread(target=serve, daemon=True)
    loop.start()
    yield server, pulls, turns
    stop.set()
    real()  # the loop's last turn
    loop.join(10)
    assert not loop.is_alive()
    # Closed here, after the join: closed by the loop thread, the trigger could be gone before the pull above
    # (a turn that ends on its own sees `stop` first), and the pull failed with EBADF.
    server.task_dispatcher.shutdown()
    server.close()


def _exchange(conn: http.client.HTTPConnection, path: str) -> tuple[int, bytes]:
    conn.request("POST", path, body=b"{}", headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read()


def _all_idle(server) -> None:
    """Every request thread back in the dispatcher's wait: the request served has wholly ended."""
    wait_until(lambda: server.task_dispatcher.active_count == 0, 10, "the request threads to be idle")


def test_an_answer_sent_whole_does_not_wake_the_loop(served):
    """The next request goes out only once the last one's service has ended: sent earlier, the loop may read
    it ahead (it arrives once the answer is out, before the service ends), and that rightly needs a wake."""
    server, pulls, _ = served
    conn = http.client.HTTPConnection("127.0.0.1", server.effective_port, timeout=5)
    _all_idle(server)
    before = pulls[0]
    for _ in range(20):
        assert _exchange(conn, "/long") == (200, LONG_BODY)
        _all_idle(server)
    assert pulls[0] - before == 0, "waitress's end-of-request wake was made for answers the loop had nothing to do for"
    conn.close()


def test_an_answer_left_for_the_loop_to_send_wakes_it(served):
    server, pulls, _ = served
    conn = http.client.HTTPConnection("127.0.0.1", server.effective_port, timeout=5)
    before = pulls[0]
    for _ in range(5):
        assert _exchange(conn, "/empty") == (202, b"")
    assert pulls[0] - before >= 5, "a header below send_bytes waits in the buffer: each needs the loop to send it"
    assert _exchange(conn, "/long") == (200, LONG_BODY)  # the connection still serves after them
    conn.close()


def test_a_request_that_closes_its_connection_wakes_the_loop(served):
    server, pulls, _ = served
    conn = http.client.HTTPConnection("127.0.0.1", server.effective_port, timeout=5)
    before = pulls[0]
    conn.request("POST", "/long", body=b"{}", headers={"Content-Type": "application/json", "Connection": "close"})
    response = conn.getresponse()
    assert (response.status, response.read()) == (200, LONG_BODY)
    _all_idle(server)  # the answer, sent whole, can reach the client before the service's end makes the wake
    assert pulls[0] - before >= 1, "a close is the loop's to make"
    conn.close()


def test_a_request_read_ahead_wakes_the_loop_at_the_end_of_the_one_before(served):
    """Two requests in one write: the loop reads the second while the first is served (the lookahead), stops
    reading past it, and must be woken to read on once the first has left the queue."""
    server, pulls, _ = served
    one = b"POST /long HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    with socket.create_connection(("127.0.0.1", server.effective_port), timeout=5) as sock:
        before = pulls[0]
        sock.sendall(one * 3)
        got = b""
        while got.count(LONG_BODY) < 3:
            chunk = sock.recv(65536)
            assert chunk, f"the connection closed after {got.count(LONG_BODY)} of 3 answers"
            got += chunk
    assert got.count(b"HTTP/1.1 200 OK") == 3
    assert pulls[0] - before >= 1, "the requests queued behind the lookahead were not read on"


def test_the_loop_does_not_spin_while_a_request_thread_sends(served, monkeypatch):
    """waitress's `writable` holds while the thread's send has the buffer's lock, and its `handle_write` then
    does nothing: every turn of the loop came straight back. Here the send is held open (a gate in the
    request thread's send) while the loop is woken three times: each wake is one turn, then the loop waits."""
    server, _, turns = served
    entered, release = threading.Event(), threading.Event()
    real_send = StreamingChannel.send

    def held_send(self, data, do_close=True):
        if threading.current_thread().name.startswith("waitress-") and not release.is_set():
            entered.set()
            assert release.wait(10), "the test never released the send"
        return real_send(self, data, do_close=do_close)

    monkeypatch.setattr(StreamingChannel, "send", held_send)
    conn = http.client.HTTPConnection("127.0.0.1", server.effective_port, timeout=10)
    answer: list[tuple[int, bytes]] = []
    client = threading.Thread(target=lambda: answer.append(_exchange(conn, "/long")), daemon=True)
    client.start()
    try:
        assert entered.wait(10), "the request thread did not send its answer itself"
        _wakes_take_one_turn_each(server, turns)
    finally:
        release.set()
    client.join(10)
    assert answer == [(200, LONG_BODY)]
    conn.close()


def _wakes_take_one_turn_each(server, turns) -> None:
    """Wake the loop three times, each once its last turn is done: a loop that waits again after each makes
    three turns (a few more if something else woke it); one that spins makes hundreds."""
    start = turns[0]
    for wake in range(1, 4):
        server.pull_trigger()
        wait_until(lambda n=start + wake: turns[0] >= n, 10, f"the loop's turn after wake {wake}")
    assert turns[0] - start <= 6, f"{turns[0] - start} turns of the loop for 3 wakes: it spun"


@contextlib.contextmanager
def _trickling(server, timeout: float):
    """A /trickle exchange on a new keep-alive connection, held at its gate while the block runs (the request's
    first bytes wait in the buffer); on leaving, the gate opens and the whole answer must arrive."""
    gate = threading.Event()
    _trickle_gates.append(gate)
    conn = http.client.HTTPConnection("127.0.0.1", server.effective_port, timeout=timeout)
    answer: list[tuple[int, bytes]] = []
    client = threading.Thread(target=lambda: answer.append(_exchange(conn, "/trickle")), daemon=True)
    client.start()
    try:
        yield conn
    finally:
        gate.set()
        _trickle_gates.remove(gate)
    client.join(10)
    assert answer == [(200, TRICKLE_HEAD + TRICKLE_REST)]


def test_the_loop_does_not_spin_on_a_few_bytes_a_running_request_left(served):
    """Below send_bytes, waitress's `handle_write` leaves the bytes to the request (its next write or its
    end) while its `writable` held: the loop came straight back for as long as the request ran."""
    server, _, turns = served
    with _trickling(server, timeout=10) as conn:
        wait_until(lambda: _served_with_bytes_buffered(server), 10, "the request to wait with its first bytes")
        _wakes_take_one_turn_each(server, turns)
    conn.close()


def _buffering(server) -> StreamingChannel | None:
    """The test's one connection, if it has bytes buffered to send."""
    channels = [c for c in server._map.values() if isinstance(c, StreamingChannel)]
    return channels[0] if len(channels) == 1 and channels[0].total_outbufs_len else None


def _served_with_bytes_buffered(server) -> bool:
    channel = _buffering(server)
    return channel is not None and bool(channel.requests)


def _ended_with_bytes_left(server) -> StreamingChannel | None:
    """The one connection, once its request has ended (no thread serves it) with bytes still to send."""
    channel = _buffering(server)
    if channel is not None and not channel.requests and server.task_dispatcher.active_count == 0:
        return channel
    return None


def test_a_send_the_request_thread_left_short_is_finished_by_the_loop(served):
    """The thread's send stops at a full socket; once it is out of it the connection is writable again, the
    loop was woken for the rest, and every byte arrives. (A small receive buffer set before connecting keeps
    the kernel from taking the whole body while the client reads nothing.)"""
    server, pulls, _ = served
    request = b"POST /huge HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}"
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.settimeout(10)
        sock.connect(("127.0.0.1", int(server.effective_port)))
        before = pulls[0]
        sock.sendall(request)
        channel = wait_until(lambda: _ended_with_bytes_left(server), 10,
                             "the request to end with bytes left (if the socket took them all: a larger body)")
        assert channel.writable()
        assert pulls[0] - before >= 1, "the loop was not woken for the bytes the thread could not send"
        got = bytearray()
        while not got.endswith(HUGE_BODY[-64:]) or len(got) < len(HUGE_BODY):
            chunk = sock.recv(1 << 20)
            assert chunk, f"the connection closed after {len(got)} bytes"
            got += chunk
    head, _, body = bytes(got).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and body == HUGE_BODY


def test_a_connection_the_loop_last_saw_unreadable_is_read_again_after_its_request(served_patiently):
    """While an answer's first bytes wait in the buffer, `readable` is False: a loop woken then (here by the
    test) selects without the connection. The request thread then sends the rest and ends with nothing left to
    send; that end must wake the loop, or the next request on the connection waits for the select's timeout
    (the daemons' 1 s stalls of one call in ~100)."""
    server, _, turns = served_patiently
    with _trickling(server, timeout=5) as conn:
        channel = wait_until(lambda: _served_with_bytes_buffered(server) and _buffering(server), 10,
                             "the request to wait with its first bytes buffered")
        start = turns[0]
        server.pull_trigger()  # the loop looks at the connection while it holds those bytes
        wait_until(lambda: turns[0] > start, 10, "the loop's turn after the wake")
        assert channel.total_outbufs_len and channel.requests, "the bytes left the buffer before the loop looked"
    _all_idle(server)
    assert _exchange(conn, "/long") == (200, LONG_BODY)  # read at once: the loop was woken at the end
    conn.close()
