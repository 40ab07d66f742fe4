"""A request's HTTP headers, read straight from the WSGI environ by name."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any
from wsgiref.types import WSGIEnvironment


@functools.lru_cache(maxsize=64)  # the names the daemon and the SDK ask for: a fixed few
def environ_key(name: str) -> str:
    """Where WSGI keeps header `name` (any case) in the environ."""
    return "HTTP_" + name.upper().replace("-", "_")


class EnvironHeaders(Mapping[str, str]):
    """The request's headers by lower-case name, looked up in the WSGI environ when asked for: a request's path
    asks for about ten, and a dict of all of them (or werkzeug's header view, which re-cases every name on
    each pass) cost more than the lookups (docs/performance.md, "Measurements behind the code"). Content-Type
    and Content-Length are not here: WSGI keeps those apart."""

    __slots__ = ("_environ",)

    def __init__(self, environ: WSGIEnvironment):
        self._environ = environ

    def get(self, name: str, default: Any = None) -> Any:
        return self._environ.get(environ_key(name), default)

    def __getitem__(self, name: str) -> str:
        value: str | None = self._environ.get(environ_key(name))
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return (key[5:].replace("_", "-").lower() for key in self._environ if key.startswith("HTTP_"))

    def __len__(self) -> int:
        return sum(1 for _ in self)
