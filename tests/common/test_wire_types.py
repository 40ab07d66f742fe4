"""common/protocol/wire_types.py against the SDK it stands in for: the same types for every (method, version)
we serve, the same dumps, the same param readers, the ladder the SDK's own; and a daemon's transport loads
neither the `mcp` package nor an era's types until a call needs them (imported in a fresh interpreter)."""

import json
import subprocess
import sys

import pytest
from mcp.shared import inbound as sdk_inbound
from mcp.shared import jsonrpc_dispatcher
from mcp_types import methods as sdk_methods
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS

from common.protocol import wire_types

OUR_METHODS = sorted({method for method, _ in wire_types.RESULTS})


@pytest.mark.parametrize("version", KNOWN_PROTOCOL_VERSIONS)
@pytest.mark.parametrize("method", OUR_METHODS)
def test_each_result_type_is_the_sdks(method, version):
    expected = sdk_methods.SERVER_RESULTS.get((method, version))
    if expected is None:
        with pytest.raises(KeyError):
            wire_types.result_type(method, version)
    else:
        assert wire_types.result_type(method, version) == expected


@pytest.mark.parametrize("version", KNOWN_PROTOCOL_VERSIONS)
def test_the_progress_notification_type_is_the_sdks(version):
    expected = sdk_methods.SERVER_NOTIFICATIONS[("notifications/progress", version)]
    assert wire_types.notification_type("notifications/progress", version) is expected


@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25"])
def test_a_result_is_dumped_as_the_sdk_dumps_it(version):
    result = {"protocolVersion": version, "capabilities": {"tools": {"listChanged": False}},
              "serverInfo": {"name": "bash", "version": "1"}, "instructions": "x", "extra": 1}
    ours = wire_types.serialize_server_result("initialize", version, result)
    assert ours == sdk_methods.serialize_server_result("initialize", version, result)
    assert "extra" not in ours


def test_unknown_versions_and_methods_are_refused_as_the_sdk_refuses_them():
    with pytest.raises(ValueError):
        wire_types.serialize_server_result("tools/list", "2099-01-01", {"tools": []})
    with pytest.raises(KeyError):
        wire_types.serialize_server_result("initialize", "2026-07-28", {})


PARAMS = [None, {}, {"_meta": {"progressToken": "t"}}, {"_meta": {"progressToken": 7}},
          {"_meta": {"progressToken": True}}, {"_meta": {"progressToken": 1.5}}, {"_meta": "x"},
          {"requestId": 3}, {"requestId": "a"}, {"requestId": False}, {"requestId": None}, {"requestId": [1]}]


@pytest.mark.parametrize("params", PARAMS)
def test_the_param_readers_read_as_the_sdks(params):
    assert wire_types.progress_token(params) == jsonrpc_dispatcher.progress_token_from_params(params)
    assert wire_types.cancelled_request_id(params) == jsonrpc_dispatcher.cancelled_request_id_from_params(params)


def test_the_ladder_is_the_sdks_own_file():
    assert wire_types.classify_inbound_request.__code__.co_filename == sdk_inbound.__file__
    assert wire_types.ERROR_CODE_HTTP_STATUS == sdk_inbound.ERROR_CODE_HTTP_STATUS


_PROBE = """
import json, sys
import common.protocol.transport, hivebash.engine, hivebash.tools, hivesubagent.engine, hivesubagent.tools
sdk = ("mcp.", "mcp_types._v", "mcp_types.methods")
print(json.dumps(sorted(m for m in sys.modules if m == "mcp" or m.startswith(sdk))))
"""


def test_a_daemon_starts_without_the_sdk_package_or_an_eras_types():
    """What the ~0.5 s start rests on (the bench's start rows measure it): the `mcp` package's __init__ and
    the per-era types stay unloaded until a call needs them."""
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(out.stdout) == []


_ERA_PROBE = """
import json, sys
from common.protocol.wire_types import serialize_server_result
serialize_server_result("tools/list", sys.argv[1], {"tools": [], "resultType": "complete", "ttlMs": 1,
                                                   "cacheScope": "public"})
print(json.dumps(sorted(m for m in sys.modules if m.startswith("mcp_types._v"))))
"""


@pytest.mark.parametrize("version, era", [("2025-06-18", "mcp_types._v2025_11_25"),
                                          ("2026-07-28", "mcp_types._v2026_07_28")])
def test_a_result_loads_its_own_eras_types_alone(version, era):
    out = subprocess.run([sys.executable, "-c", _ERA_PROBE, version], capture_output=True, text=True, check=True,
                         timeout=60)
    assert json.loads(out.stdout) == [era]
