"""The serving loop is woken at a request's end only when it has something new to do (common/stream_channel.py,
`quiet_request_ends`): the daemons' own waitress server, in this process so that its trigger can be counted,
driven over real keep-alive sockets. A wake left out where one was needed would leave an answer or a close
waiting for the loop's 1 s select timeout; each case checks that the loop was woken and the exchange done."""

import http.client
import socket
import threading

import pytest
from daemon_harness import wait_until
from waitress import wasyncore

from common.config import ServerSettings
from common.serve import _create_server

# Above send_bytes (common/serve.py): the request thread sends it whole.
LONG_BODY = b'{"jsonrpc":"2.0","id":1,"result":{"text":"' + b"x" * 400 + b'"}}'


def _app(environ, start_response):
    """/long: a body the request thread sends whole; /empty: 202 without a body (its header waits for the loop)."""
    if environ["PATH_INFO"] == "/empty":
        start_response("202 Accepted", [("Content-Length", "0")])
        return [b""]
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(LONG_BODY)))])
    return [LONG_BODY]


@pytest.fixture
def served():
    """(server, pulls): the server runs its loop in a thread; `pulls` counts the trigger's physical pulls."""
    server = _create_server(_app, ServerSettings(host="127.0.0.1", port=0, threads=2))
    pulls = [0]
    real = server.trigger.pull_trigger

    def counted(thunk=None):
        pulls[0] += 1
        return real(thunk)

    server.trigger.pull_trigger = counted
    stop = threading.Event()

    def serve() -> None:  # waitress's own loop, one turn at a time, so that this thread can end it and close
        while not stop.is_set():
            wasyncore.loop(timeout=1.0, map=server._map, count=1)
        server.task_dispatcher.shutdown()
        server.close()

    loop = threading.Thread(target=serve, daemon=True)
    loop.start()
    yield server, pulls
    stop.set()
    real()  # the loop's last turn
    loop.join(10)
    assert not loop.is_alive()


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
    server, pulls = served
    conn = http.client.HTTPConnection("127.0.0.1", server.effective_port, timeout=5)
    _all_idle(server)
    before = pulls[0]
    for _ in range(20):
        assert _exchange(conn, "/long") == (200, LONG_BODY)
        _all_idle(server)
    assert pulls[0] - before == 0, "waitress's end-of-request wake was made for answers the loop had nothing to do for"
    conn.close()


def test_an_answer_left_for_the_loop_to_send_wakes_it(served):
    server, pulls = served
    conn = http.client.HTTPConnection("127.0.0.1", server.effective_port, timeout=5)
    before = pulls[0]
    for _ in range(5):
        assert _exchange(conn, "/empty") == (202, b"")
    assert pulls[0] - before >= 5, "a header below send_bytes waits in the buffer: each needs the loop to send it"
    assert _exchange(conn, "/long") == (200, LONG_BODY)  # the connection still serves after them
    conn.close()


def test_a_request_that_closes_its_connection_wakes_the_loop(served):
    server, pulls = served
    conn = http.client.HTTPConnection("127.0.0.1", server.effective_port, timeout=5)
    before = pulls[0]
    conn.request("POST", "/long", body=b"{}", headers={"Content-Type": "application/json", "Connection": "close"})
    response = conn.getresponse()
    assert (response.status, response.read()) == (200, LONG_BODY)
    assert pulls[0] - before >= 1, "a close is the loop's to make"
    conn.close()


def test_a_request_read_ahead_wakes_the_loop_at_the_end_of_the_one_before(served):
    """Two requests in one write: the loop reads the second while the first is served (the lookahead), stops
    reading past it, and must be woken to read on once the first has left the queue."""
    server, pulls = served
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
