"""What a tools/call whose body is over the request limit is told: which argument made it large, by how much, and
what to do instead (a plain-text HTTP 413 teaches the model nothing, so it retries the same call). What
to do is the tool's own (`Tool.file_route`): a bash `run` runs a script by its path, a subagent's `continue`
names the file in a short prompt; the sentence around it is written once, here.

common/protocol/transport.py reads such a body (up to ServerSettings.body_ceiling_bytes) and
common/protocol/methods.py answers it through the same `isError` path as any argument refusal; the tool's handler
never runs.
"""

from typing import Any

from common.json_text import compact
from common.protocol.argument_errors import ToolArgumentsError
from common.protocol.tools import Tool

ADVICE = "write the long part to a file and {route}"  # the route: the tool's own (Tool.file_route)
DEFAULT_ROUTE = "pass its path instead"


def _size(value: Any) -> int:
    """An argument's size in bytes: UTF-8 for text, its JSON for anything else."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    return len(compact(value))


def _own_limit(tool: Tool[Any], name: str) -> str:
    """The argument's own limit, as the tool declares it (bytes when it checks bytes, else the schema's length)."""
    if name in (tool.byte_limits or {}):
        return f"; {name} itself allows at most {tool.byte_limits[name]:,} bytes of UTF-8"  # type: ignore[index]
    prop = tool.input_schema.get("properties", {}).get(name, {})
    if isinstance(prop, dict) and isinstance(prop.get("maxLength"), int):
        return f"; {name} itself allows at most {prop['maxLength']:,} characters"
    return ""


def oversized_arguments(tool: Tool[Any], arguments: Any, body_bytes: int, limit: int) -> ToolArgumentsError:
    """The refusal of a call whose request body (`body_bytes`) is over `limit`, naming its largest argument."""
    request = f"the request is {body_bytes:,} bytes, over the {limit:,}-byte ({limit / 2**20:g} MiB) request limit"
    if isinstance(arguments, dict) and arguments:
        name = max(arguments, key=lambda key: _size(arguments[key]))
        where = f"{name}: is {_size(arguments[name]):,} bytes, so {request}{_own_limit(tool, name)}"
    else:
        where = f"arguments: {request}"
    advice = ADVICE.format(route=tool.file_route or DEFAULT_ROUTE)
    return ToolArgumentsError(f"{where}. Nothing was run: {advice}.")
