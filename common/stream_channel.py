"""waitress's side of a streamed answer (common/event_stream.py): events leave as they are written, and a
client that hangs up mid-answer is told to the request at once.

- Flush: waitress sends what a request thread writes only once `send_bytes` (common/serve.py: 256) are
  buffered, or when the answer ends; a progress event is ~250-400 bytes, so one would wait for the next.
  `flush_now` sends the buffer from the request thread as `write_soon` does for a large write (the socket is
  non-blocking: a slow reader leaves the bytes buffered, the thread never blocks; the serving loop sends
  them when the socket drains).
- Hang-up: with `channel_request_lookahead` (common/serve.py) the serving loop reads the connection while a
  request runs and sees its end (EOF, or a failed send); the request's registered function (HANGUP_KEY,
  a `Cancellation.fire`) is called then, from the serving loop, so a wait ends at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from waitress.channel import HTTPChannel
from waitress.task import WSGITask

from common.event_stream import FLUSH_KEY, HANGUP_KEY

log = logging.getLogger(__name__)


class StreamingTask(WSGITask):
    """waitress's WSGI task, with the two hooks of a streamed answer in its environ."""

    def get_environment(self) -> dict[str, Any]:
        environ = super().get_environment()
        channel = self.channel
        assert isinstance(channel, StreamingChannel), "task_class of a StreamingChannel only"
        environ[FLUSH_KEY] = channel.flush_now
        environ[HANGUP_KEY] = channel.on_hangup
        return environ


class StreamingChannel(HTTPChannel):
    """waitress's HTTP channel with the two hooks (common/connection_guard.GuardedChannel builds on it)."""

    task_class = StreamingTask
    _hangup: Callable[[], None] | None = None

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
