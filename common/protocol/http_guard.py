"""Who may talk to a daemon: Host and Origin allowlists (DNS-rebinding protection) and the optional bearer token.

Comparisons are exact on the host name, never by prefix: `localhost.evil.example` is not `localhost`.
The token is compared in constant time (`hmac.compare_digest`).
"""

import hmac
import ipaddress
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import click

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
# environ: the caller is a --metrics-allow-uid user (common/serving/connection_guard.py), who may read /metrics
# and /healthz alone.
METRICS_ONLY_KEY = "hive.metrics_only"


class TokenFileError(click.ClickException):
    """The token file is missing, unreadable, empty or open to other users (click prints it, exit 1)."""


def is_loopback_address(host: str) -> bool:
    """True for names and addresses that only this machine can reach."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token_file(path: Path) -> str:
    """Read the bearer token; refuse a file other users can read (it is a password)."""
    try:
        info = os.stat(path)
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise TokenFileError(f"token file {path}: cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise TokenFileError(f"token file {path}: must be a regular file")
    if info.st_mode & 0o077:
        raise TokenFileError(f"token file {path}: must not be readable by group or others (chmod 600)")
    if not text:
        raise TokenFileError(f"token file {path}: is empty")
    return text


_PORT = re.compile(r"[0-9]{0,5}")  # RFC 3986 `port = *DIGIT`


def split_host_header(value: str) -> str | None:
    """The host name of a Host value (`name`, `name:port`, `[v6]`, `[v6]:port`, bare `::1`), lowercased, or None
    when the value is not of that form: `[::1].evil.example`, `localhost:80@evil.example` and two Host headers
    joined by a comma must never pass for loopback (tests/robustness/test_security_http.py)."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        host, rest = (value[1:end], value[end + 1 :]) if end > 0 else ("", "?")
    elif value.count(":") == 1:
        host, _, port = value.partition(":")
        rest = ":" + port
    else:
        host, rest = value, ""  # a bare name, or a bare IPv6 address
    if rest and not (rest.startswith(":") and _PORT.fullmatch(rest[1:])):
        return None
    return host


def _origin_port(authority: str) -> str:
    """The port of a valid `host[:port]` authority, "80" (http's default) when it names none."""
    if authority.startswith("["):
        port = authority[authority.find("]") + 1:].removeprefix(":")
    else:
        port = authority.partition(":")[2]
    return str(int(port)) if port else "80"


@dataclass(frozen=True)
class Guard:
    allowed_hosts: frozenset[str]
    allowed_origins: frozenset[str]
    token: str | None

    @classmethod
    def build(cls, bind_host: str, extra_hosts: Iterable[str] = (), extra_origins: Iterable[str] = (),
              token: str | None = None) -> "Guard":
        hosts = set(LOOPBACK_NAMES) | {h.lower() for h in extra_hosts}
        if bind_host not in ("0.0.0.0", "::", ""):
            hosts.add(bind_host.strip("[]").lower())
        return cls(frozenset(hosts), frozenset(o.rstrip("/").lower() for o in extra_origins), token)

    def host_allowed(self, host_header: str | None) -> bool:
        # HTTP/1.1 requires Host; a request without one cannot be checked, so it is refused.
        if not host_header:
            return False
        host = split_host_header(host_header)
        return host is not None and host in self.allowed_hosts

    def origin_allowed(self, origin: str | None, server_port: str | None) -> bool:
        """No Origin header (every MCP client tried sends none) is fine; a present one must be the daemon's own
        URL origin (http, one of its host names, its port) or one of --allowed-origins. Any other port of this
        machine is another origin: a local dev server's page must not drive the daemon from a browser."""
        if origin is None:
            return True
        origin = origin.strip().rstrip("/").lower()
        if origin in self.allowed_origins:
            return True
        # An Origin is exactly scheme://host[:port] (RFC 6454); anything else (a path, user info, a bracket
        # followed by more name) is not our origin, however a URL parser would read it.
        scheme, sep, authority = origin.partition("://")
        if not sep or scheme != "http" or split_host_header(authority) not in self.allowed_hosts:
            return False
        return _origin_port(authority) == server_port

    def token_ok(self, authorization: str | None) -> bool:
        if self.token is None:
            return True
        if not authorization:
            return False
        # WSGI hands header values over latin-1 decoded: encoding back gives the bytes the client sent (UTF-8 for
        # a non-ASCII token). The scheme is case-insensitive (RFC 9110 section 11.1).
        scheme, _, credentials = authorization.encode("latin-1", "replace").partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return hmac.compare_digest(credentials.strip(), self.token.encode())
