"""The `mcp_types` package without its monolith until a name of it is needed: its `__init__` imports
`mcp_types._types`, ~200 pydantic models (~0.2 s of a daemon's ~0.45 s start), while a daemon's first calls
need only the package's small modules (`version`, `jsonrpc`) and, for a result, one era's module.

`defer_monolith()` puts the package in `sys.modules` as its own spec makes it, with its submodules importable
as usual, and runs its real `__init__` the first time a name of it is asked for (PEP 562 `__getattr__`), after
which it is the package as the SDK wrote it. What the SDK's request ladder (`mcp/shared/inbound.py`) and our
transport take from it at import or on every call is there from the start: the reserved `_meta` keys
(tests/common/test_sdk_package.py compares them with the SDK's), and the error data of an unsupported version,
which the ladder builds only when it refuses one (a stand-in that imports the model at that first call).
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

PACKAGE = "mcp_types"
RESERVED_KEYS = {
    "PROTOCOL_VERSION_META_KEY": "io.modelcontextprotocol/protocolVersion",
    "CLIENT_INFO_META_KEY": "io.modelcontextprotocol/clientInfo",
    "CLIENT_CAPABILITIES_META_KEY": "io.modelcontextprotocol/clientCapabilities",
    "SERVER_INFO_META_KEY": "io.modelcontextprotocol/serverInfo",
}
_loading = threading.RLock()  # (the `__init__` run under it may ask the package for a name)
_whole_ids: set[int] = set()  # the packages whose `__init__` has been run


class _Deferred:
    """A model of the monolith that is only ever called: imported, and called, at its first call."""

    def __init__(self, package: ModuleType, name: str):
        self._package, self._name = package, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _whole(self._package).__dict__[self._name](*args, **kwargs)


def defer_monolith() -> None:
    """Install the package as described above, unless it was imported already (then nothing changes)."""
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.loader is None:
        return  # the import that needs it raises its own error
    package = importlib.util.module_from_spec(spec)
    package.__dict__.update(RESERVED_KEYS)
    package.__dict__["UnsupportedProtocolVersionErrorData"] = _Deferred(package, "UnsupportedProtocolVersionErrorData")
    package.__dict__["__getattr__"] = lambda name: _attribute(package, name)
    sys.modules[PACKAGE] = package


def _attribute(package: ModuleType, name: str) -> Any:
    whole = _whole(package)
    try:
        return whole.__dict__[name]
    except KeyError:
        raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}") from None


def _whole(package: ModuleType) -> ModuleType:
    """The package with its `__init__` run (once, whichever thread asks first)."""
    with _loading:
        if id(package) not in _whole_ids:
            _whole_ids.add(id(package))  # first: the `__init__` may ask for a name while it runs
            assert package.__spec__ is not None and package.__spec__.loader is not None
            package.__spec__.loader.exec_module(package)
            del package.__dict__["__getattr__"]
    return package
