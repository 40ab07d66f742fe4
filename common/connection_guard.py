"""Per-connection guards in waitress's accept loop: who the caller is (its uid), and how long a request may
take to arrive.

- Caller uid: checked once per connection, right after accept and before any byte of the request is read
  (common/peer_uid.py reads it from the kernel's socket table). A local caller whose uid is not allowed gets
  403 and the connection is closed; what it sent is never parsed. A client that is not on this machine has no
  row there: it is let through to the bearer token, which a daemon listening beyond loopback always requires.
- Request deadline: a request whose headers and body have not all arrived `body_timeout` seconds after its
  first byte is cut off (408): waitress would otherwise hold a stalled chunked upload until its idle timeout
  (120 s), so a few hundred of them would lock the agent out.
"""

from __future__ import annotations

import logging
import os
import pwd
import time
from dataclasses import dataclass

import click
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer

from common.config import ServerSettings
from common.http_guard import is_loopback_address
from common.peer_uid import PeerUnknown, peer_uid

log = logging.getLogger(__name__)

# How often waitress looks for expired requests (its cleanup_interval, seconds): the deadline's resolution.
SWEEP_SECONDS = 1


def allowed_uids(settings: ServerSettings) -> frozenset[int]:
    """The daemon's own uid and every --allow-uid (a number or a user name of this machine)."""
    uids = {os.geteuid()}
    for value in settings.allow_uid:
        value = value.strip()
        if value.isdigit():
            uids.add(int(value))
            continue
        try:
            uids.add(pwd.getpwnam(value).pw_uid)
        except KeyError:
            raise click.BadParameter(f"{value!r} is neither a uid nor a user of this machine", param_hint="--allow-uid") from None
    return frozenset(uids)


def _plain_response(status: str, text: str) -> bytes:
    body = (text + "\n").encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


@dataclass(frozen=True)
class ConnectionPolicy:
    uids: frozenset[int]
    body_timeout: float

    def refusal(self, sock) -> bytes | None:
        """The 403 answer for a connection whose caller is not allowed, or None to serve it."""
        try:
            local, peer = sock.getsockname(), sock.getpeername()
        except OSError:
            return None  # already gone: waitress notices on its first read
        try:
            uid = peer_uid(local, peer)
        except PeerUnknown:
            if not is_loopback_address(peer[0]):
                return None  # not on this machine: the bearer token decides
            log.warning("refused a connection from %s:%s: its owner cannot be found in the socket table", peer[0], peer[1])
            return _plain_response("403 Forbidden", "Forbidden: the calling process's user cannot be determined")
        except (OSError, ValueError) as exc:
            log.warning("refused a connection from %s:%s: cannot read the socket table (%s)", peer[0], peer[1], exc)
            return _plain_response("403 Forbidden", "Forbidden: the calling process's user cannot be determined")
        if uid in self.uids:
            return None
        log.warning("refused a connection from uid %d (%s:%s): not an allowed caller (--allow-uid)", uid, peer[0], peer[1])
        return _plain_response("403 Forbidden", f"Forbidden: uid {uid} may not call this daemon "
                                                "(its operator can allow it with --allow-uid)")


class GuardedChannel(HTTPChannel):
    """waitress's HTTP channel with the caller check at creation and a deadline on each request's arrival."""

    def __init__(self, server, sock, addr, adj, map=None):
        super().__init__(server, sock, addr, adj, map)
        policy: ConnectionPolicy = server.hive_policy
        self.refused = policy.refusal(sock)
        # Monotonic time the request now being read began to arrive (None: none is partly read). A refused
        # connection is on the clock from the start, so one that never sends anything is closed soon too.
        self.request_began: float | None = time.monotonic() if self.refused else None
        self._timed_request = None

    def received(self, data):
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
                        self.addr[0], self.addr[1], self.server.hive_policy.body_timeout)
        if self.requests or self.will_close or self.close_when_flushed:
            self.will_close = True
            return
        self._answer_and_close(self.refused or _plain_response(
            "408 Request Timeout", f"Request Timeout: the request did not arrive within {self.server.hive_policy.body_timeout:g}s"))


def _sweep(server: TcpWSGIServer, original_maintenance):
    def maintenance(now: float) -> None:
        original_maintenance(now)
        cutoff = time.monotonic() - server.hive_policy.body_timeout
        for channel in list(server.active_channels.values()):
            began = getattr(channel, "request_began", None)
            if began is not None and began < cutoff:
                channel.expire()

    return maintenance


def install(server, policy: ConnectionPolicy) -> None:
    """Put the guards on every TCP listener of a waitress server (create_server returns one, or several for
    a host name with more than one address)."""
    listeners = [server] if isinstance(server, TcpWSGIServer) else [
        s for s in server.map.values() if isinstance(s, TcpWSGIServer)]
    for listener in listeners:
        listener.hive_policy = policy
        listener.channel_class = GuardedChannel
        listener.maintenance = _sweep(listener, listener.maintenance)
