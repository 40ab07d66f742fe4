"""The SDK's `mcp_types` package without its models until one is needed: its `__init__` imports the monolith
`mcp_types._types` (~200 pydantic models, ~0.2 s of a daemon's start) and `mcp_types.jsonrpc` is a module of
pydantic models too (pydantic itself ~60 ms more), while a daemon's first call needs only their constants: a
plain `tools/call` result is built and sent with no model (common/protocol/methods.py), and a result of an era's
type imports that era's module when first shaped (wire_types.py).

`defer_models()` puts both modules in `sys.modules` as their own specs make them, submodules importable as
usual, and runs a module's real code the first time a name of it is asked for (PEP 562 `__getattr__`), after
which it is the module as the SDK wrote it. The names that our modules and the SDK's request ladder
(`mcp/shared/inbound.py`) take from them at import, or on every call, are there from the start: the reserved
`_meta` keys, the JSON-RPC error codes (tests/common/test_sdk_package.py compares each with the SDK's), and the
error data of an unsupported version, which the ladder builds only when it refuses one (a stand-in that
imports the model at that first call).
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

GIVEN: dict[str, dict[str, Any]] = {  # module -> the names it has before its code runs
    "mcp_types": {
        "PROTOCOL_VERSION_META_KEY": "io.modelcontextprotocol/protocolVersion",
        "CLIENT_INFO_META_KEY": "io.modelcontextprotocol/clientInfo",
        "CLIENT_CAPABILITIES_META_KEY": "io.modelcontextprotocol/clientCapabilities",
        "SERVER_INFO_META_KEY": "io.modelcontextprotocol/serverInfo",
    },
    "mcp_types.jsonrpc": {
        "JSONRPC_VERSION": "2.0",
        "PARSE_ERROR": -32700,
        "INVALID_REQUEST": -32600,
        "METHOD_NOT_FOUND": -32601,
        "INVALID_PARAMS": -32602,
        "INTERNAL_ERROR": -32603,
        "HEADER_MISMATCH": -32020,
        "MISSING_REQUIRED_CLIENT_CAPABILITY": -32021,
        "UNSUPPORTED_PROTOCOL_VERSION": -32022,
    },
}
CALLED_ONLY = {"mcp_types": ("UnsupportedProtocolVersionErrorData",)}  # models a stand-in imports at first call
_loading = threading.RLock()  # (a module's code, run under it, may ask a deferred module for a name)
_run: set[str] = set()  # the modules whose code has been run


class _Deferred:
    """A model that is only ever called: imported, and called, at its first call."""

    def __init__(self, module: ModuleType, name: str):
        self._module, self._name = module, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _whole(self._module).__dict__[self._name](*args, **kwargs)


def defer_models() -> None:
    """Install the modules as described above, unless the SDK's package was imported already (then nothing
    changes)."""
    if "mcp_types" in sys.modules:
        return
    for name, given in GIVEN.items():
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return  # the import that needs it raises its own error
        module = importlib.util.module_from_spec(spec)
        module.__dict__.update(given)
        for model in CALLED_ONLY.get(name, ()):
            module.__dict__[model] = _Deferred(module, model)
        module.__dict__["__getattr__"] = lambda attribute, module=module: _attribute(module, attribute)
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


def _attribute(module: ModuleType, name: str) -> Any:
    if name.startswith("__") and name != "__all__":  # the import system's looks (`__path__`: a package?)
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
    try:
        return _whole(module).__dict__[name]
    except KeyError:
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from None


def _whole(module: ModuleType) -> ModuleType:
    """The module with its code run (once, whichever thread asks first)."""
    with _loading:
        if module.__name__ not in _run:
            _run.add(module.__name__)  # first: its code may ask it for a name while it runs
            assert module.__spec__ is not None and module.__spec__.loader is not None
            module.__spec__.loader.exec_module(module)
            del module.__dict__["__getattr__"]
    return module
