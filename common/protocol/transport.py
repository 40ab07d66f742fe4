"""The MCP streamable-HTTP transport as a WSGI app (werkzeug), serving a ToolRegistry in both protocol eras.

Routing follows the official SDK (`mcp/server/streamable_http_manager.py`): a request whose
`MCP-Protocol-Version` header names a version outside the handshake set goes to the stateless 2026-07-28
path; no header or a handshake version goes to the `initialize`/`Mcp-Session-Id` path. Every answer is one
JSON body, but for a tools/call that asked for progress (a `progressToken`, text/event-stream accepted) and
has some to tell: that one is an SSE stream of its notifications, then its response (common/protocol/event_stream.py).
No stream outlives its call, so no request thread is pinned by a client for longer than the call's wait.

The methods themselves are common/protocol/methods.py. Message shapes are validated and serialised with the `mcp`
package's own types (`mcp_types`), and the 2026 request ladder (envelope, header/body agreement, version) is
the SDK's own `classify_inbound_request` (common/protocol/wire_types.py: each era's types when first needed).
"""

import functools
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.types import StartResponse, WSGIEnvironment

import mcp_types
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wrappers import Request, Response

from common.config import ServerSettings
from common.json_text import compact
from common.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from common.metrics import MetricsRegistry
from common.metrics.tool_calls import ToolCallMetrics
from common.protocol import after_answer, mcp_tasks
from common.protocol.event_stream import StreamedCall
from common.protocol.http_guard import METRICS_ONLY_KEY, Guard, read_token_file
from common.protocol.methods import McpMethods, RpcError, error_body
from common.protocol.request_headers import EnvironHeaders, environ_key
from common.protocol.sessions import Session, SessionTable
from common.protocol.tools import ToolRegistry
from common.protocol.wire_types import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    cancelled_request_id,
    classify_inbound_request,
    initialize_protocol_version,
    unsupported_protocol_version_rejection,
)

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
# Batches exist only in this revision (added in 2025-03-26, removed in 2025-06-18).
BATCH_VERSION = "2025-03-26"
# A request without the version header is 2025-03-26 (transports, "Protocol Version Header").
DEFAULT_HANDSHAKE_VERSION = "2025-03-26"


class JsonAnswer:
    """A JSON answer as a bare WSGI response: the status line and headers werkzeug's Response would send, without
    building one (its header object and charset handling were a visible share of every tools/call's path:
    docs/performance.md, "Measurements behind the code")."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, body: Any, status: int = 200, headers: dict[str, str] | None = None):
        self.body = compact(body).encode()
        self.status = status
        self.headers = [*(headers or {}).items(), ("Content-Type", "application/json"),
                        ("Content-Length", str(len(self.body)))]

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        start_response(f"{self.status} {HTTP_STATUS_CODES.get(self.status, 'UNKNOWN').upper()}", self.headers)
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [self.body]


Answer = Response | JsonAnswer  # what a route returns


def _plain(status: int, text: str, headers: dict[str, str] | None = None) -> Answer:
    return Response(text + "\n", status=status, headers=headers, mimetype="text/plain")


def _unauthorized() -> Answer:
    return _plain(401, "Unauthorized: a valid bearer token is required", {"WWW-Authenticate": 'Bearer realm="hive"'})


def _invalid(rule: str) -> RpcError:
    """A JSON-RPC Invalid Request error saying which rule the message broke."""
    return RpcError(INVALID_REQUEST, f"Invalid request: {rule}")


class McpRequest(Request):
    """werkzeug's Request, with its headers read straight from the environ (`header`, EnvironHeaders)."""

    start_response: StartResponse  # set before routing: a streamed answer starts before the route returns
    body_bytes = 0  # the size of the body read (a tools/call over max_body_bytes is refused as a tool error)

    def header(self, name: str) -> str | None:
        """One HTTP header (not Content-Type or Content-Length: WSGI keeps those apart)."""
        value: str | None = self.environ.get(environ_key(name))
        return value


def _accepts_json(request: McpRequest) -> bool:
    """Accept must allow application/json (wildcards count); an absent Accept header means anything."""
    accept = request.header("Accept")
    return True if accept is None else _accept_allows_json(accept)


@functools.lru_cache(maxsize=64)  # a client sends the same Accept on every call
def _accept_allows_json(accept: str) -> bool:
    kinds = [part.split(";")[0].strip().lower() for part in accept.split(",")]
    return any(k in ("application/json", "application/*", "*/*") for k in kinds)


def _is_json_content(request: McpRequest) -> bool:
    """The media type of Content-Type, read as werkzeug's `mimetype` reads it (without its parameter parser)."""
    content_type: str = request.environ.get("CONTENT_TYPE", "")
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def _answered(call: StreamedCall | None, reply: dict[str, Any], plain: Callable[[], Answer]) -> Answer:
    """`plain()`, or the end of the call's stream when it streamed (common/protocol/event_stream.py)."""
    return plain() if call is None else call.answer(reply, plain)


def _metrics_page(request: McpRequest, metrics: MetricsRegistry, guard: Guard) -> Answer:
    """GET /metrics, behind the token of /mcp (the Host, Origin and caller's uid are checked before)."""
    if not guard.token_ok(request.header("Authorization")):
        return _unauthorized()
    if request.method not in ("GET", "HEAD"):
        return _plain(405, "Method Not Allowed", {"Allow": "GET, HEAD"})
    return Response(metrics.text(), content_type=METRICS_CONTENT_TYPE)


def _beyond_metrics(request: McpRequest) -> Answer | None:
    """403 for a --metrics-allow-uid caller (the connection guard marked it) asking for more than its paths."""
    beyond = request.environ.get(METRICS_ONLY_KEY) and request.path not in (METRICS_PATH, HEALTH_PATH)
    return _plain(403, f"Forbidden: this caller may read {METRICS_PATH} and {HEALTH_PATH} only") if beyond else None


class McpApp:
    """WSGI app: POST/GET/DELETE /mcp (both eras), GET /healthz, and GET /metrics when `metrics` is given."""

    def __init__(self, registry: ToolRegistry, server_name: str, server_version: str, settings: ServerSettings,
                 metrics: MetricsRegistry | None = None):
        self.registry = registry
        self.metrics = metrics
        registry.metrics = ToolCallMetrics(metrics, [t.name for t in registry.tools()]) if metrics else None
        self.methods = McpMethods(registry, settings.max_body_bytes, mcp_tasks=settings.mcp_tasks == "on")
        self.server_info = {"name": server_name, "version": server_version}
        self.settings = settings
        token = read_token_file(settings.token_file) if settings.token_file else None
        self.guard = Guard.build(settings.host, settings.allowed_hosts, settings.allowed_origins, token)
        self.sessions = SessionTable(settings.session_ttl, settings.max_sessions)

    # -- WSGI entry ---------------------------------------------------------------------------------------------

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        after_answer.begin()
        return after_answer.answer_then_run(self._answer(environ, start_response))

    def _answer(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        request = McpRequest(environ)
        request.max_content_length = self.settings.body_ceiling_bytes
        request.start_response = start_response  # a streamed answer starts before the route returns
        try:
            response = self._route(request)
        except Exception:  # never a 500 page with a traceback; the operator gets it in the log
            log.exception("unexpected error serving %s %s", request.method, request.path)
            response = JsonAnswer(error_body(None, RpcError(INTERNAL_ERROR, "Internal error")), 500)
        return response(environ, start_response)

    def _route(self, request: McpRequest) -> Answer:
        if not self.guard.host_allowed(request.header("Host")):
            # 421 as the SDK's TransportSecurityMiddleware answers: the name is not one this server serves.
            return _plain(421, "Invalid Host header")
        if not self.guard.origin_allowed(request.header("Origin"), request.environ.get("SERVER_PORT")):
            return _plain(403, "Invalid Origin header")
        if (refusal := _beyond_metrics(request)) is not None:
            return refusal
        if request.path == HEALTH_PATH:
            if request.method not in ("GET", "HEAD"):
                return _plain(405, "Method Not Allowed", {"Allow": "GET, HEAD"})
            return JsonAnswer({"ok": True, "server": self.server_info})
        if request.path == METRICS_PATH and self.metrics is not None:
            return _metrics_page(request, self.metrics, self.guard)
        if request.path != MCP_PATH:
            return _plain(404, f"Not Found: the MCP endpoint is {MCP_PATH}")
        if not self.guard.token_ok(request.header("Authorization")):
            return _unauthorized()
        version = request.header(VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return self._modern(request)
        return self._handshake(request, version)

    @staticmethod
    def _streamed_call(request: McpRequest, body: dict[str, Any], version: str) -> StreamedCall | None:
        """The link of a tools/call to its client (cancellation, progress); None for any other method."""
        if body.get("method") != "tools/call" or "id" not in body:
            return None
        return StreamedCall(request.environ, request.start_response, body.get("params"), version,
                            request.header("Accept"))

    def _read_json(self, request: McpRequest) -> Any:
        """The decoded body, or RpcError(PARSE_ERROR) / 413 as a RequestEntityTooLarge. A body over
        max_body_bytes (and within the ceiling) is kept only if it is one tools/call, which is then refused as
        a tool error naming its largest argument (common/protocol/oversized_call.py); anything else that large is
        413."""
        length = request.content_length
        if length is not None and length > self.settings.body_ceiling_bytes:
            raise RequestEntityTooLarge()
        if length is not None and request.environ.get("wsgi.input_terminated"):
            # What get_data would read, without its stream wrappers (their cost is paid on every call): the
            # server (waitress) hands over the whole body, ended at its length.
            data = request.environ["wsgi.input"].read(length)
        else:
            data = request.get_data(cache=False)  # bounded by max_content_length
        request.body_bytes = len(data)
        oversized = len(data) > self.settings.max_body_bytes
        try:
            body = json.loads(data)
        except (ValueError, RecursionError):
            # Not only JSONDecodeError: huge integer literals raise ValueError, deep nesting RecursionError.
            if oversized:
                raise RequestEntityTooLarge() from None
            raise RpcError(PARSE_ERROR, "Parse error: the body is not valid JSON", http_status=400) from None
        if oversized and not (isinstance(body, dict) and body.get("method") == "tools/call" and "id" in body):
            raise RequestEntityTooLarge()
        return body

    def _post_body(self, request: McpRequest) -> Any:
        """The decoded JSON body of a POST, or the Response that refuses it (406, 415, 413, parse error)."""
        if (refusal := self._precheck_post(request)) is not None:
            return refusal
        try:
            return self._read_json(request)
        except RequestEntityTooLarge:
            return _plain(413, f"Request body too large (limit {self.settings.max_body_bytes} bytes)")
        except RpcError as err:
            return JsonAnswer(error_body(None, err), 400)

    def _precheck_post(self, request: McpRequest) -> Answer | None:
        if not _accepts_json(request):
            return _plain(406, "Not Acceptable: the client must accept application/json")
        if not _is_json_content(request):
            return _plain(415, "Unsupported Media Type: Content-Type must be application/json")
        return None

    # -- 2026-07-28: one self-contained POST, no sessions ------------------------------------------------------

    def _modern(self, request: McpRequest) -> Answer:
        if request.method != "POST":
            return _plain(405, "Method Not Allowed: this protocol version uses POST only", {"Allow": "POST"})
        body = self._post_body(request)
        if isinstance(body, Answer):
            return body
        if isinstance(body, dict) and "id" not in body:
            return self._modern_notification(request, body)
        if not isinstance(body, dict) or not isinstance(body.get("method"), str) or body.get("jsonrpc") != "2.0":
            err = _invalid("the body must be one JSON-RPC request object (no batches)")
            return JsonAnswer(error_body(None, err), 400)
        request_id = body["id"]
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            return JsonAnswer(error_body(None, _invalid("id must be a string or integer")), 400)
        # No find_duplicated_routing_header: waitress folds a repeated header into "a, b", never the body's value.
        verdict = classify_inbound_request(body, headers=(headers := EnvironHeaders(request.environ)))
        if body["method"] in mcp_tasks.NAMED_METHODS and not isinstance(verdict, InboundLadderRejection):
            verdict = mcp_tasks.name_rejection(body, headers) or verdict  # the tasks extension's Mcp-Name rule
        if isinstance(verdict, InboundLadderRejection):
            return self._modern_error(request_id, RpcError(verdict.code, verdict.message, verdict.data))
        version = verdict.protocol_version
        call = self._streamed_call(request, body, version)
        try:
            result = self.methods.dispatch(body["method"], body.get("params"), version, modern=True, call=call,
                                           body_bytes=request.body_bytes)
            result.setdefault("resultType", "complete")
            result = self.methods.serialise(body["method"], version, result)
        except RpcError as err:
            return _answered(call, error_body(request_id, err), lambda: self._modern_error(request_id, err))
        result.setdefault("_meta", {})[mcp_types.SERVER_INFO_META_KEY] = self.server_info
        reply = {"jsonrpc": "2.0", "id": request_id, "result": result}
        return _answered(call, reply, lambda: JsonAnswer(reply))

    def _modern_notification(self, request: McpRequest, body: dict[str, Any]) -> Answer:
        """Acknowledge and drop (202): the 2026 wire defines no client notifications a server acts on."""
        if body.get("jsonrpc") != "2.0" or not isinstance(body.get("method"), str):
            return JsonAnswer(error_body(None, RpcError(INVALID_REQUEST, "Invalid notification")), 400)
        rejection = unsupported_protocol_version_rejection(request.header(VERSION_HEADER) or "")
        if rejection is not None:
            return self._modern_error(None, RpcError(rejection.code, rejection.message, rejection.data))
        return Response(status=202)

    def _modern_error(self, request_id: Any, err: RpcError) -> Answer:
        status = err.http_status or ERROR_CODE_HTTP_STATUS.get(err.code, 200)
        return JsonAnswer(error_body(request_id, err), status)

    # -- handshake era: initialize, sessions, optional batches -------------------------------------------------

    def _handshake(self, request: McpRequest, version_header: str | None) -> Answer:
        if request.method == "DELETE":
            return self._end_session(request)
        if request.method != "POST":
            # GET would open a server-to-client stream; we push nothing, and every client tried accepts 405.
            return _plain(405, "Method Not Allowed: no server-initiated stream is offered", {"Allow": "POST, DELETE"})
        body = self._post_body(request)
        if isinstance(body, Answer):
            return body
        if isinstance(body, dict) and body.get("method") == "initialize" and "id" in body:
            return self._initialize(body)
        session_id = request.header(SESSION_HEADER)
        if not session_id:
            return _plain(400, f"Bad Request: missing {SESSION_HEADER} header (send initialize first)")
        session = self.sessions.touch(session_id)
        if session is None:
            return _plain(404, "Not Found: unknown or expired session; initialize again")
        version = version_header or DEFAULT_HANDSHAKE_VERSION
        if isinstance(body, list):
            if version != BATCH_VERSION:
                err = _invalid(f"JSON-RPC batches exist only in protocol version {BATCH_VERSION}, not {version}")
                return JsonAnswer(error_body(None, err), 400)
            return self._batch(body, session)
        call = self._streamed_call(request, body, session.protocol_version) if isinstance(body, dict) else None
        with self.sessions.tracking(session, body.get("id") if call else None, call):
            reply = self._handshake_message(body, session.protocol_version, session=session, call=call,
                                            body_bytes=request.body_bytes)
        if reply is None:
            return Response(status=202)
        status = 400 if "error" in reply and reply["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST) else 200
        return _answered(call, reply, lambda: JsonAnswer(reply, status))

    def _initialize(self, body: dict[str, Any]) -> Answer:
        request_id = body.get("id")
        params = body.get("params")
        try:
            requested = initialize_protocol_version(params)
        except ValueError as exc:
            err = RpcError(INVALID_PARAMS, f"Invalid initialize params: {exc}")
            return JsonAnswer(error_body(request_id, err), 400)
        negotiated = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        session = self.sessions.create(negotiated)
        result = {
            "protocolVersion": negotiated,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": self.server_info,
            **self.methods.instructions(),
        }
        result = self.methods.serialise("initialize", negotiated, result)
        return JsonAnswer({"jsonrpc": "2.0", "id": request_id, "result": result}, headers={SESSION_HEADER: session.id})

    def _end_session(self, request: McpRequest) -> Answer:
        session_id = request.header(SESSION_HEADER)
        if not session_id:
            return _plain(400, f"Bad Request: missing {SESSION_HEADER} header")
        if not self.sessions.end(session_id):
            return _plain(404, "Not Found: unknown or expired session")
        return Response(status=204)

    def _batch(self, items: list[Any], session: Session) -> Answer:
        if not items:
            return JsonAnswer(error_body(None, _invalid("empty batch")), 400)
        replies = [r for r in (self._handshake_message(item, session.protocol_version, in_batch=True, session=session)
                               for item in items) if r is not None]
        return JsonAnswer(replies) if replies else Response(status=202)

    def _handshake_message(self, message: Any, version: str, in_batch: bool = False, session: Session | None = None,
                           call: StreamedCall | None = None, body_bytes: int = 0) -> dict[str, Any] | None:
        """Answer one JSON-RPC message; None for notifications and client responses (202)."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return error_body(None, _invalid("not a JSON-RPC 2.0 message"))
        if "method" not in message:
            return None  # a response to a server request; we send none, so there is nothing to match it to
        if "id" not in message:
            if message.get("method") == "notifications/cancelled" and session is not None:
                self.sessions.cancel(session, cancelled_request_id(message.get("params")))
            return None  # notification (notifications/initialized, cancelled, ...): accepted
        request_id = message["id"]
        method = message.get("method")
        if not isinstance(method, str) or not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            return error_body(None, _invalid("method must be a string, id a string or integer"))
        if method == "initialize":
            reason = "initialize may not be batched" if in_batch else "the session is already initialized"
            return error_body(request_id, _invalid(reason))
        try:
            result = self.methods.dispatch(method, message.get("params"), version, modern=False, call=call,
                                           body_bytes=body_bytes)
            result = self.methods.serialise(method, version, result)
        except RpcError as err:
            return error_body(request_id, err)
        return {"jsonrpc": "2.0", "id": request_id, "result": result}
