"""The SDK's wire types and its 2026 request ladder, imported only as a call needs them, so that a daemon
answers its first call soon after it starts.

- The per-era types (`mcp_types._v2025_11_25` for every handshake version, `mcp_types._v2026_07_28` for
  2026) are imported when a result or notification of that era is first shaped, each model built when first
  used (`_import_era`): the plain tools/call result (common/protocol/methods.py) needs neither.
  `mcp_types.methods` would import both at once; `RESULTS` names the same types for the methods we serve
  (tests/common/test_wire_types.py checks each pair against the SDK's SERVER_RESULTS and SERVER_NOTIFICATIONS).
- The ladder is the SDK's own `mcp/shared/inbound.py`, which needs only `mcp_types`; it is loaded by itself
  because the `mcp` package's `__init__` imports the SDK's whole client and server (~0.45 s).
- `progress_token` and `cancelled_request_id` read params as the SDK's jsonrpc_dispatcher does (the same
  tests compare them), without importing its anyio machinery.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

if TYPE_CHECKING:
    from pydantic import TypeAdapter

ERAS = {"handshake": "mcp_types._v2025_11_25", "modern": "mcp_types._v2026_07_28"}

# (method, era): the names of its result types in that era's module (a union when more than one); a pair
# missing here is a method that era does not have.
RESULTS: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("initialize", "handshake"): ("InitializeResult",),
    ("ping", "handshake"): ("Result",),
    ("tools/list", "handshake"): ("ListToolsResult",),
    ("tools/list", "modern"): ("ListToolsResult",),
    ("tools/call", "handshake"): ("CallToolResult",),
    ("tools/call", "modern"): ("CallToolResult", "InputRequiredResult"),
    ("server/discover", "modern"): ("DiscoverResult",),
}
NOTIFICATIONS: Mapping[tuple[str, str], str] = {
    ("notifications/progress", "handshake"): "ProgressNotification",
    ("notifications/progress", "modern"): "ProgressNotification",
}


def era(version: str) -> str:
    """"handshake" or "modern"; ValueError for a version the SDK does not know."""
    if version in HANDSHAKE_PROTOCOL_VERSIONS:
        return "handshake"
    if version in MODERN_PROTOCOL_VERSIONS:
        return "modern"
    raise ValueError(f"version must be a known protocol version, got {version!r}")


def era_module(version: str) -> ModuleType:
    """The SDK's types of `version`'s era, imported the first time it is asked for."""
    return _import_era(era(version))


def _import_era(era_name: str) -> ModuleType:
    """The era's module; its first import builds each of its ~150 models' validators only when that model is
    first used (pydantic's `defer_build`, set on their base for the import): the daemons use a handful, and
    building all at once was ~35 ms of the first handshake-era call."""
    name = ERAS[era_name]
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    from mcp_types._wire_base import WireModel

    config = WireModel.model_config
    before = config.get("defer_build")
    config["defer_build"] = True  # each model copies its base's config as its class is made
    try:
        return importlib.import_module(name)
    finally:
        if before is None:
            config.pop("defer_build", None)
        else:
            config["defer_build"] = before


def result_type(method: str, version: str) -> Any:
    """The SDK's result type of `method` in `version` (KeyError: that version has no such method)."""
    return _era_result_type(method, era(version))


def _era_result_type(method: str, era_name: str) -> Any:
    module = _import_era(era_name)
    types = [getattr(module, name) for name in RESULTS[(method, era_name)]]
    union = types[0]
    for more in types[1:]:
        union = union | more
    return union


@functools.cache
def _result_adapter(method: str, era_name: str) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter  # (with the era's types: a plain tools/call result needs no pydantic)

    return TypeAdapter(_era_result_type(method, era_name))


def serialize_server_result(method: str, version: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """As mcp_types.methods.serialize_server_result: `data` validated against the version's type and dumped
    in its wire shape. ValueError: an unknown version; KeyError: no such method in it; ResultMismatch: `data`
    does not fit."""
    adapter = _result_adapter(method, era(version))
    from pydantic import ValidationError  # (loaded with the adapter)

    try:
        dumped: dict[str, Any] = adapter.dump_python(adapter.validate_python(data, by_name=False), by_alias=True,
                                                     mode="json", exclude_none=True)
    except ValidationError as exc:
        raise ResultMismatch(str(exc)) from exc
    return dumped


class ResultMismatch(Exception):
    """A result does not fit its type in the SDK (pydantic's ValidationError, which is a ValueError, as ours is
    not: a caller tells it apart from an unknown version)."""


def initialize_protocol_version(params: Any) -> str:
    """The version a handshake `initialize` asks for, its params validated with that era's own model (ValueError:
    the first rule they break, and where)."""
    model = _import_era("handshake").InitializeRequestParams
    from pydantic import ValidationError  # (loaded with the era's types)

    try:
        version: str = model.model_validate(params).protocol_version
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "params"
        raise ValueError(f"{where}: {first.get('msg', 'invalid')}") from None
    return version


def notification_type(method: str, version: str) -> Any:
    """The SDK's type of the server notification `method` in `version` (KeyError: none)."""
    return getattr(era_module(version), NOTIFICATIONS[(method, era(version))])


def progress_token(params: Mapping[str, Any] | None) -> str | int | None:
    """params._meta.progressToken, a string or an integer (a bool is not: True would alias 1)."""
    match params:
        case {"_meta": {"progressToken": str() | int() as token}} if not isinstance(token, bool):
            return token
        case _:
            return None


def cancelled_request_id(params: Mapping[str, Any] | None) -> str | int | None:
    """params.requestId of a notifications/cancelled: a string or an integer, never a bool."""
    value = (params or {}).get("requestId")
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def _sdk_inbound() -> ModuleType:
    """mcp/shared/inbound.py of the installed SDK, as a module of its own (the one already imported, if the
    process imported the SDK)."""
    loaded = sys.modules.get("mcp.shared.inbound")
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("mcp")  # finds the package without running its __init__
    if package is None or not package.submodule_search_locations:
        raise ImportError("the mcp package is not installed")
    path = Path(next(iter(package.submodule_search_locations))) / "shared" / "inbound.py"
    name = f"{__name__}._sdk_inbound"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:
    from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS as ERROR_CODE_HTTP_STATUS
    from mcp.shared.inbound import MCP_NAME_HEADER as MCP_NAME_HEADER
    from mcp.shared.inbound import InboundLadderRejection as InboundLadderRejection
    from mcp.shared.inbound import InboundModernRoute as InboundModernRoute
    from mcp.shared.inbound import classify_inbound_request as classify_inbound_request
    from mcp.shared.inbound import decode_header_value as decode_header_value
    from mcp.shared.inbound import unsupported_protocol_version_rejection as unsupported_protocol_version_rejection
else:
    _inbound = _sdk_inbound()
    ERROR_CODE_HTTP_STATUS = _inbound.ERROR_CODE_HTTP_STATUS
    MCP_NAME_HEADER = _inbound.MCP_NAME_HEADER
    InboundLadderRejection = _inbound.InboundLadderRejection
    InboundModernRoute = _inbound.InboundModernRoute
    classify_inbound_request = _inbound.classify_inbound_request
    decode_header_value = _inbound.decode_header_value
    unsupported_protocol_version_rejection = _inbound.unsupported_protocol_version_rejection
