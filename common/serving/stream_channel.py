"""waitress's side of a streamed answer (common/protocol/event_stream.py): events leave as they are written, a
client that hangs up mid-answer is told to the request at once, and the serving loop neither wakes nor spins for
nothing. The four rules (flush, hang-up, wake, spin) are in docs/design.md, "Streamed answers through waitress";
the figures behind them in docs/performance.md ("The run path, a third time", "The serving loop's spin");
tests/common/test_loop_wakes.py holds each case.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import WSGITask

from common.protocol.event_stream import FLUSH_KEY, HANGUP_KEY
from common.protocol.http_guard import METRICS_ONLY_KEY

log = logging.getLogger(__name__)

_SERVING = threading.local()  # in a request thread: the channel it serves and that channel's request


class StreamingTask(WSGITask):
    """waitress's WSGI task, with the two hooks of a streamed answer in its environ."""

    def get_environment(self) -> dict[str, Any]:
        environ = super().get_environment()
        channel = self.channel
        assert isinstance(channel, StreamingChannel), "task_class of a StreamingChannel only"
        environ[FLUSH_KEY] = channel.flush_now
        environ[HANGUP_KEY] = channel.on_hangup
        if channel.metrics_only:
            environ[METRICS_ONLY_KEY] = True
        return environ


class StreamingChannel(HTTPChannel):
    """waitress's HTTP channel with the two hooks (common/connection_guard.GuardedChannel builds on it)."""

    task_class = StreamingTask
    _hangup: Callable[[], None] | None = None
    _sending = False  # this connection's request thread is in a send of its buffer (module doc: Spin)
    _loop_reads = False  # the serving loop's last look put this connection in its select's read set
    metrics_only = False  # the caller may read /metrics and /healthz alone (GuardedChannel sets it)

    def readable(self) -> bool:
        """waitress's rule, noted for `loop_sees_no_change`: the flag is cleared before the look, so a request's
        end that reads it during one takes it as unread and wakes the loop."""
        self._loop_reads = False
        reads = bool(super().readable())
        self._loop_reads = reads
        return reads

    def writable(self) -> bool:
        """Whether the loop's `handle_write` would act now (module doc: Spin): a close to make, or bytes it may
        send, which while a request runs means at least `send_bytes` and no send of the request thread's."""
        if self.will_close or self.close_when_flushed:
            return True
        if not self.total_outbufs_len:
            return False
        if not self.requests:
            return True
        return not self._sending and self.total_outbufs_len >= self.adj.send_bytes

    def _flush_some(self, do_close: bool = True) -> bool:
        if getattr(_SERVING, "channel", None) is not self:  # the serving loop's own send
            return bool(super()._flush_some(do_close=do_close))  # type: ignore[misc]  # the stubs leave it out
        self._sending = True
        try:
            return bool(super()._flush_some(do_close=do_close))  # type: ignore[misc]
        finally:
            self._sending = False

    def service(self) -> None:
        _SERVING.channel, _SERVING.request = self, self.requests[0]
        try:
            super().service()
        finally:
            _SERVING.channel = _SERVING.request = None

    def loop_sees_no_change(self) -> bool:
        """Whether the serving loop, woken now, would find this channel as it left it: the request served has
        left `requests` (a wake while it is still served is a write's, and is kept), the connection is open,
        nothing is left to send or close (`writable`), the requests still queued are within the lookahead, and
        the loop's last look found the connection readable. A look while the answer's bytes were buffered
        (`readable` is False then) left it out of the select: without a wake the next request waited for the
        select's 1 s timeout."""
        if self.requests and self.requests[0] is _SERVING.request:
            return False
        return bool(self.connected and self._loop_reads and not self.writable()
                    and len(self.requests) < self.adj.channel_request_lookahead)

    def on_hangup(self, fn: Callable[[], None] | None) -> None:
        """Call `fn` once if the client hangs up (None: forget it; the request that set it has ended)."""
        self._hangup = fn
        if fn is not None and not self.connected:
            self._hung_up()

    def flush_now(self) -> None:
        with self.outbuf_lock:  # (waitress's own write_soon does this; the stubs leave its internals out)
            _, failed = self._flush_exception(self._flush_some, do_close=False)  # type: ignore[attr-defined]
        if failed or self.total_outbufs_len:
            self.server.pull_trigger()  # the serving loop sends the rest, or closes a broken connection

    def handle_read(self) -> None:
        super().handle_read()
        if not self.connected:
            self._hung_up()

    def handle_close(self) -> None:
        super().handle_close()
        self._hung_up()

    def _hung_up(self) -> None:
        fn, self._hangup = self._hangup, None
        if fn is not None:
            try:
                fn()
            except Exception:  # the serving loop must go on whatever a request's hook does
                log.exception("a hang-up hook failed")


def quiet_request_ends(listener: TcpWSGIServer) -> None:
    """Skip waitress's end-of-request wake of the serving loop when it would find nothing new (module doc)."""
    pull = listener.pull_trigger

    def pull_trigger() -> None:
        channel = getattr(_SERVING, "channel", None)
        if channel is None or not channel.loop_sees_no_change():
            pull()

    listener.pull_trigger = pull_trigger  # type: ignore[method-assign]  # wrapped, as connection_guard wraps maintenance
