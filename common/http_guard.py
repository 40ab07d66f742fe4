"""Who may talk to a daemon: Host and Origin allowlists (DNS-rebinding protection) and the optional bearer token.

Comparisons are exact on the host name, never by prefix: `localhost.evil.example` is not `localhost`.
The token is compared in constant time (`hmac.compare_digest`).
"""

import hmac
import ipaddress
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import click

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


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


def split_host_header(value: str) -> str:
    """The host name of a Host header value, without port; IPv6 brackets removed."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@dataclass(frozen=True)
class Guard:
    allowed_hosts: frozenset[str]
    allowed_origins: frozenset[str]
    token: str | None

    @classmethod
    def build(cls, bind_host: str, extra_hosts=(), extra_origins=(), token: str | None = None) -> "Guard":
        hosts = set(LOOPBACK_NAMES) | {h.lower() for h in extra_hosts}
        if bind_host not in ("0.0.0.0", "::", ""):
            hosts.add(bind_host.strip("[]").lower())
        return cls(frozenset(hosts), frozenset(o.rstrip("/").lower() for o in extra_origins), token)

    def host_allowed(self, host_header: str | None) -> bool:
        # HTTP/1.1 requires Host; a request without one cannot be checked, so it is refused.
        if not host_header:
            return False
        return split_host_header(host_header) in self.allowed_hosts

    def origin_allowed(self, origin: str | None) -> bool:
        """No Origin header (every MCP client tried sends none) is fine; a present one must be ours."""
        if origin is None:
            return True
        origin = origin.strip().rstrip("/").lower()
        if origin in self.allowed_origins:
            return True
        try:
            parts = urlsplit(origin)
            hostname = parts.hostname
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and hostname is not None and hostname in LOOPBACK_NAMES

    def token_ok(self, authorization: str | None) -> bool:
        if self.token is None:
            return True
        if not authorization or not authorization.startswith("Bearer "):
            return False
        return hmac.compare_digest(authorization[len("Bearer ") :].strip().encode(), self.token.encode())
