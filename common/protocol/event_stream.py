"""A POST answered as an SSE stream (text/event-stream): JSON-RPC notifications written the moment they are
produced, then the response as the last event, then the end of the stream.

The stream commits (status line and headers) with its first notification, as the SDK's own server does
(`mcp/server/_streamable_http_modern.py` defers the same way): a call that ends before it has anything to
tell is answered with the one JSON body any other call gets, byte for byte and as fast. Events go out
through WSGI's `write` from the request thread, then `FLUSH_KEY` pushes them onto the socket at once (waitress
would hold a write below its send_bytes until the answer ends: common/serving/stream_channel.py).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any
from wsgiref.types import StartResponse, WSGIEnvironment

from waitress.channel import ClientDisconnected

from common.json_text import compact
from common.protocol.call_progress import NO_PROGRESS, Cancellation, ProgressNotifier, ProgressReporter
from common.protocol.wire_types import progress_token

log = logging.getLogger(__name__)

FLUSH_KEY = "hive.flush"  # environ: push what the app wrote onto the socket now (common/serving/stream_channel.py)
HANGUP_KEY = "hive.on_hangup"  # environ: register the function to call when the client hangs up
MAX_TOKEN_CHARS = 256  # a longer string progressToken is answered as a call without one
SSE_HEADERS = (
    ("Content-Type", "text/event-stream"),
    ("Cache-Control", "no-cache, no-transform"),
    ("X-Accel-Buffering", "no"),  # the transport page: proxies must not buffer the stream
)


def sse_event(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as one SSE event, framed as the SDK's server frames it."""
    return b"event: message\r\ndata: " + compact(message).encode() + b"\r\n\r\n"


@functools.lru_cache(maxsize=64)  # a client sends the same Accept on every call
def accepts_event_stream(accept: str | None) -> bool:
    """Whether an Accept header names text/event-stream (a wildcard alone does not: a client that lists only
    JSON, or */*, is answered as it always was)."""
    for part in (accept or "").split(","):
        kind, *params = (p.strip().lower() for p in part.split(";"))
        if kind == "text/event-stream":
            weights = [p[2:] for p in params if p.startswith("q=")]
            return not weights or _weight(weights[0]) > 0
    return False


def _weight(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 1.0


class EventStream:
    """The SSE answer of one request, committed by its first `send`."""

    def __init__(self, environ: dict[str, Any], start_response: StartResponse):
        self._start_response = start_response
        self._flush: Callable[[], None] = environ.get(FLUSH_KEY) or (lambda: None)
        self._write: Callable[[bytes], Any] | None = None
        self.gone = False

    @property
    def committed(self) -> bool:
        return self._write is not None

    def send(self, message: dict[str, Any]) -> bool:
        """Write one message onto the stream now; False once the client is gone."""
        if self.gone:
            return False
        try:
            if self._write is None:
                self._write = self._start_response("200 OK", list(SSE_HEADERS))
                log.debug("answering %s as an event stream (the client asked for progress)", message.get("method"))
            self._write(sse_event(message))
            self._flush()
        except (ClientDisconnected, OSError) as exc:  # the reader is gone
            log.debug("progress stream closed by the client: %s", exc)
            self.gone = True
            return False
        return True

    def end(self, final: dict[str, Any] | None) -> list[bytes]:
        """The body that ends a committed stream: the response as its last event, or nothing for a call whose
        client cancelled it (none may be sent after a cancel)."""
        return [] if final is None or self.gone else [sse_event(final)]


class StreamedCall:
    """One tools/call's link to its client: its cancellation (a hang-up fires it), its progress reporter and,
    when the client asked for progress (a token, and text/event-stream accepted), the stream it goes on."""

    def __init__(self, environ: dict[str, Any], start_response: StartResponse, params: Any, version: str,
                 accept: str | None):
        self.cancel = Cancellation()
        self._channel_gone: Callable[[], bool] = environ.get("waitress.client_disconnected") or (lambda: False)
        token = progress_token(params) if isinstance(params, dict) else None
        if isinstance(token, str) and len(token) > MAX_TOKEN_CHARS:
            token = None  # echoed in every notification: a huge one would make each event as large
        self.stream: EventStream | None = None
        self.progress: ProgressReporter = NO_PROGRESS
        if token is not None and accepts_event_stream(accept):
            self.stream = EventStream(environ, start_response)
            self.progress = ProgressNotifier(token, version, self.stream, self.cancel)
        self._hook = environ.get(HANGUP_KEY)
        if self._hook is not None:
            self._hook(self.cancel.fire)

    def client_gone(self) -> bool:
        """Whether the client cancelled the call or hung up: the answer will not be read."""
        return self.cancel.fired or self._channel_gone()

    def answer(self, body: dict[str, Any], plain: Callable[[], Any]) -> Any:
        """The WSGI answer of the call: `plain()` (the JSON answer) unless a stream was committed, which then
        ends with `body` as its last event (or without it after a cancel)."""
        if self._hook is not None:
            self._hook(None)
        if self.stream is None or not self.stream.committed:
            return plain()
        return StreamEnd(self.stream.end(None if self.client_gone() else body))


class StreamEnd:
    """The WSGI answer that ends a committed stream (its status and headers are already sent)."""

    __slots__ = ("body",)

    def __init__(self, body: list[bytes]):
        self.body = body

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        return self.body
