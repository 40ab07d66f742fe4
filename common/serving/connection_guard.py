"""Per-connection guards in waitress's accept loop: who the caller is (its uid), how long a request may take
to arrive, and room for a new caller when idle connections crowd the connection limit.

- Caller uid: checked once per connection, right after accept and before any byte of the request is read
  (common/serving/peer_uid.py reads it from the kernel's socket table). A local caller whose uid is not allowed gets
  403 and the connection is closed; what it sent is never parsed. A client that is not on this machine has no
  row there: it is let through to the bearer token, which a daemon listening beyond loopback always requires.
- Request deadlines: a request whose headers and body have not all arrived `body_timeout` seconds after its
  first byte is cut off (408): waitress would otherwise hold a stalled chunked upload until its idle timeout
  (120 s), so a few hundred of them would lock the agent out. A new connection must bring its first whole
  request within `first_request_timeout` of being accepted, for the same reason: a couple of hundred
  connections that never send a byte would fill the limit and make every caller wait 120 s. A connection
  whose request is being served (a 30 s inline wait, a streamed answer) is never idle.
- Room near the limit: when a new connection brings the count within ROOM of `--connection-limit`, the idle
  connections that waited longest are closed (those that never sent a request first), so a caller is let in
  at once instead of waiting in the backlog for a deadline. Only idle ones: nothing partly read or answered.
"""

from __future__ import annotations

import logging
import os
import pwd
import socket
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
from waitress.server import TcpWSGIServer

from common.config import ServerSettings
from common.protocol.http_guard import is_loopback_address
from common.serving.peer_uid import PeerUnknown, peer_uid
from common.serving.stream_channel import StreamingChannel, quiet_request_ends

log = logging.getLogger(__name__)

# How often waitress looks for expired requests (its cleanup_interval, seconds): the deadline's resolution.
SWEEP_SECONDS = 1
# Connections kept free below --connection-limit (waitress stops accepting at the limit): a tenth of it.
ROOM_FRACTION = 0.1
# Closing idle connections is logged at once, then at most once in this many seconds, with the count.
LOG_EVERY = 60.0


def allowed_uids(settings: ServerSettings) -> frozenset[int]:
    """The daemon's own uid and every --allow-uid (a number or a user name of this machine)."""
    return frozenset({os.geteuid(), *_uids(settings.allow_uid, "--allow-uid")})


def metrics_uids(settings: ServerSettings) -> frozenset[int]:
    """The --metrics-allow-uid users that are not allowed to call already: /metrics and /healthz alone."""
    return _uids(settings.metrics_allow_uid, "--metrics-allow-uid") - allowed_uids(settings)


def _uids(values: tuple[str, ...], hint: str) -> frozenset[int]:
    uids: set[int] = set()
    for value in values:
        value = value.strip()
        if value.isdigit():
            uids.add(int(value))
            continue
        try:
            uids.add(pwd.getpwnam(value).pw_uid)
        except KeyError:
            raise click.BadParameter(f"{value!r} is neither a uid nor a user of this machine",
                                     param_hint=hint) from None
    return frozenset(uids)


def _plain_response(status: str, text: str) -> bytes:
    body = (text + "\n").encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


_UNKNOWN_CALLER = _plain_response("403 Forbidden", "Forbidden: the calling process's user cannot be determined")


@dataclass(frozen=True)
class ConnectionPolicy:
    uids: frozenset[int]
    body_timeout: float
    first_request_timeout: float = 5.0
    connection_limit: int = 200
    metrics_uids: frozenset[int] = frozenset()  # may read /metrics and /healthz only (McpApp refuses the rest)

    @property
    def crowded_at(self) -> int:
        """Open sockets (waitress's map: listener, trigger, connections) from which idle connections make room."""
        return self.connection_limit - max(1, int(self.connection_limit * ROOM_FRACTION))

    def caller(self, sock: socket.socket) -> tuple[bytes | None, bool]:
        """(the 403 answer for a connection whose caller is not allowed, or None to serve it; whether the
        caller may read /metrics and /healthz alone: a --metrics-allow-uid user)."""
        try:
            local, peer = sock.getsockname(), sock.getpeername()
        except OSError:
            return None, False  # already gone: waitress notices on its first read
        try:
            uid = peer_uid(local, peer)
        except PeerUnknown:
            if not is_loopback_address(peer[0]):
                return None, False  # not on this machine: the bearer token decides
            log.warning("refused a connection from %s:%s: its owner cannot be found in the socket table",
                        peer[0], peer[1])
            return _UNKNOWN_CALLER, False
        except (OSError, ValueError) as exc:
            log.warning("refused a connection from %s:%s: cannot read the socket table (%s)", peer[0], peer[1], exc)
            return _UNKNOWN_CALLER, False
        if uid in self.uids or uid in self.metrics_uids:
            return None, uid not in self.uids
        log.warning("refused a connection from uid %d (%s:%s): not an allowed caller (--allow-uid)",
                    uid, peer[0], peer[1])
        return _plain_response("403 Forbidden", f"Forbidden: uid {uid} may not call this daemon "
                                                "(its operator can allow it with --allow-uid)"), False


class GuardedChannel(StreamingChannel):
    """waitress's HTTP channel with the caller check at creation, a deadline on each request's arrival and on
    a new connection's first request, and room made for it near the connection limit (and, from
    StreamingChannel, the hooks of a streamed answer)."""

    def __init__(self, server: TcpWSGIServer, sock: socket.socket, addr: Any, adj: Any,
                 map: dict[int, Any] | None = None) -> None:
        super().__init__(server, sock, addr, adj, map)
        self.policy = policy = _LISTENERS[server].policy
        self.refused, self.metrics_only = policy.caller(sock)
        self.accepted_at = time.monotonic()
        # Monotonic time the request now being read began to arrive (None: none is partly read). A refused
        # connection is on the clock from the start, so one that never sends anything is closed soon too.
        self.request_began: float | None = self.accepted_at if self.refused else None
        self._timed_request: object = None
        self.served = False  # a whole request has reached a request thread: no longer a new connection
        if len(_socket_map(server)) >= policy.crowded_at:
            make_room(server, self)

    def service(self) -> None:
        self.served = True  # before the request leaves self.requests: the sweeps never see it idle and new
        return super().service()

    def idle(self) -> bool:
        """Nothing partly read, being answered or waiting to be sent, and not closing already."""
        return not (self.requests or self.request is not None or self.total_outbufs_len or self.will_close
                    or self.close_when_flushed)

    def close_idle(self) -> None:
        """Close an idle connection (the next turn of the serving loop does): no request of it is lost."""
        self.request_began = None
        self.will_close = True

    def received(self, data: bytes) -> bool:
        if self.refused is not None:
            if not (self.will_close or self.close_when_flushed):
                self._answer_and_close(self.refused)
            return True  # read and dropped: nothing a refused caller sends is parsed
        result = super().received(data)
        if self.request is None:
            self.request_began = self._timed_request = None
        elif self.request is not self._timed_request:
            self._timed_request, self.request_began = self.request, time.monotonic()
        return result

    def _answer_and_close(self, response: bytes) -> None:
        with self.outbuf_lock:  # as waitress's own send_continue appends to the buffer
            self.outbufs[-1].append(response)
            self.current_outbuf_count += len(response)
            self.total_outbufs_len += len(response)
        self.close_when_flushed = True

    def expire(self) -> None:
        """The request took too long to arrive: answer 408 when no earlier response is in flight, and close."""
        self.request_began = None
        if self.refused is None:
            log.warning("closing a connection from %s:%s: its request did not arrive within %gs (--body-timeout)",
                        self.addr[0], self.addr[1], self.policy.body_timeout)
        self._refuse(_plain_response("408 Request Timeout", "Request Timeout: the request did not arrive within "
                                     f"{self.policy.body_timeout:g}s"))

    def expire_first(self) -> None:
        """No whole first request within --first-request-timeout: closed, with a 408 if one had begun."""
        if self.request is None:
            self.close_idle()
            return
        self.request_began = None
        self._refuse(_plain_response("408 Request Timeout", "Request Timeout: the first request did not arrive "
                                     f"within {self.policy.first_request_timeout:g}s of connecting"))

    def _refuse(self, response: bytes) -> None:
        if self.requests or self.will_close or self.close_when_flushed:
            self.will_close = True
            return
        self._answer_and_close(self.refused or response)


class _Tally:
    """Closings of one kind, logged at once and then at most every LOG_EVERY seconds (hundreds can come at
    once: a line each would flood the journal)."""

    def __init__(self, message: str):
        self.message, self.count, self.next_log = message, 0, 0.0

    def add(self, count: int, now: float) -> None:
        self.count += count
        self.flush(now)

    def flush(self, now: float) -> None:
        if self.count and now >= self.next_log:
            log.warning(self.message, self.count)
            self.count, self.next_log = 0, now + LOG_EVERY


@dataclass
class _Listener:
    """What install() puts on one listening socket: its policy and the tallies of what its sweeps closed."""

    policy: ConnectionPolicy
    tallies: dict[str, _Tally]


# Each guarded listener's, set by install(); a channel looks its listener's up once, at accept.
_LISTENERS: weakref.WeakKeyDictionary[Any, _Listener] = weakref.WeakKeyDictionary()


def _socket_map(server: Any) -> dict[int, Any]:
    """Every open socket of the serving loop (wasyncore's map, which the stubs do not declare)."""
    sockets: dict[int, Any] = server._map
    return sockets


def _channels(server: Any) -> list[GuardedChannel]:
    return [c for c in _socket_map(server).values() if isinstance(c, GuardedChannel)]


def make_room(server: Any, newcomer: GuardedChannel) -> None:
    """Close the idle connections that waited longest (never served first) until the open sockets are below
    the policy's crowded_at again; called as a connection is accepted, so the newcomer itself is spared."""
    channels = _channels(server)
    closing = sum(1 for c in channels if c.will_close or c.close_when_flushed)
    listener = _LISTENERS[server]
    excess = len(_socket_map(server)) - closing - listener.policy.crowded_at + 1
    if excess <= 0:
        return
    idle = sorted((c for c in channels if c is not newcomer and c.idle()),
                  key=lambda c: (c.served, c.refused is None, c.last_activity))
    for channel in idle[:excess]:
        channel.close_idle()
    listener.tallies["room"].add(min(excess, len(idle)), time.monotonic())


def _sweep(server: TcpWSGIServer, original_maintenance: Callable[[Any], None]) -> Callable[[Any], None]:
    def maintenance(now: float) -> None:
        original_maintenance(now)
        listener, clock = _LISTENERS[server], time.monotonic()
        policy = listener.policy
        cutoff, first_cutoff, silent = clock - policy.body_timeout, clock - policy.first_request_timeout, 0
        channels: dict[int, object] = server.active_channels  # type: ignore[assignment]  # the stub: one channel
        for channel in list(channels.values()):
            if not isinstance(channel, GuardedChannel):
                continue
            if (not channel.served and channel.refused is None and channel.accepted_at < first_cutoff
                    and not channel.requests and not (channel.will_close or channel.close_when_flushed)):
                channel.expire_first()
                silent += 1
            elif channel.request_began is not None and channel.request_began < cutoff:
                channel.expire()
        listener.tallies["first"].add(silent, clock)
        listener.tallies["room"].flush(clock)

    return maintenance


def install(server: Any, policy: ConnectionPolicy) -> None:
    """Put the guards on every TCP listener of a waitress server (create_server returns one, or several for
    a host name with more than one address)."""
    listeners = [server] if isinstance(server, TcpWSGIServer) else [
        s for s in server.map.values() if isinstance(s, TcpWSGIServer)]
    for listener in listeners:
        _LISTENERS[listener] = _Listener(policy, {
            "first": _Tally(f"%d connection(s) sent no whole request within {policy.first_request_timeout:g}s of "
                            "connecting: closed (--first-request-timeout)"),
            "room": _Tally(f"%d idle connection(s) closed to make room: the connection limit "
                           f"({policy.connection_limit}) was near (--connection-limit)")})
        listener.channel_class = GuardedChannel
        quiet_request_ends(listener)  # (common/serving/stream_channel.py: the channel's end-of-request wake)
        listener.maintenance = _sweep(listener, listener.maintenance)  # type: ignore[method-assign,assignment]  # wrapped
