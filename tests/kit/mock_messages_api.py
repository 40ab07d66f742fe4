"""A small mock of Anthropic's Messages API on loopback, so the real `claude` CLI runs here with no account.

Why a mock: the tests drive the real claude CLI (2.1.328) end to end, and the only thing that cannot run here
is Anthropic's API. This server answers what claude sends with Anthropic's own wire shapes (SSE for
`stream: true`), and lets a test steer each reply through directives in the current prompt (the last block of the
last user message that is not a `<system-reminder>`):

    MOCK:sleep=SECONDS     send message_start, then wait that long before the text (a turn "in progress");
                           cut short when the server stops
    MOCK:fail=STATUS       answer HTTP STATUS with an Anthropic error body (e.g. 500, 400)
    MOCK:reply=TEXT        the reply text (rest of the line); default "mock reply #N"
    MOCK:tool=NAME {JSON}  reply with one tool_use block (NAME, input JSON); the next request, whose last user
                           message carries the tool_result, gets a text reply quoting that result. Several
                           MOCK:tool lines: one call per model call, in order, then the text reply
    MOCK:cost=N            report N output tokens (default 7) so cost figures differ per turn; a large N makes
                           claude's --max-budget-usd stop the turn
    MOCK:long=N            the reply is N characters of numbered lines (`long_reply(N)`), for paging
    MOCK:hold=KEY          the turn's final reply (the text one, after any tool call) waits after message_start
                           until the test calls `server.release(KEY)` (or the server stops): a turn held
                           mid-way on a condition of the test's, not a sleep

What the real CLI sends (probed 2026-11-30 with claude 2.1.328 as scripts/test installs it, env as in
`claude_env()` below; `server.requests` keeps the exact log, and test_interop_claude.py checks the first
points on every run):
  * nothing but `POST /v1/messages?beta=true`, `stream: true`, one per model call: no count_tokens, no
    telemetry, no other path with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1. Anything else would be logged
    and answered sensibly anyway: count_tokens with an estimate, any other path 404 `not_found_error`;
  * headers `x-api-key`, `anthropic-version: 2023-06-01`, a long `anthropic-beta` list, `x-app: cli`,
    `X-Claude-Code-Session-Id` (the session uuid); body keys `model`, `system` (text blocks; the
    `--append-system-prompt-file` text is among them), `messages`, `tools`, `max_tokens`, `metadata`,
    `thinking`, `context_management`, `output_config`;
  * `messages` ends with a `role: "system"` entry (the environment block) after the user prompt: no strict
    user/assistant alternation. User content is a list of text blocks, the prompt last after several
    `<system-reminder>` blocks (or a `tool_result` block after a tool call);
  * after a failed turn the next prompt is merged into the SAME user message (["first MOCK:fail=400",
    "second"]), hence directives come from the last non-reminder block only;
  * an HTTP 500 is retried CLAUDE_CODE_MAX_RETRIES times (~0.5 s apart), a 400 up to 6 requests in all;
    then the turn ends with an `is_error` result (`api_error_status`) and rc 1;
  * the default model is `claude-opus-5-5`; claude prices the mock's usage, so costs are small but non-zero;
  * SIGINT mid-turn (stream-json): rc 0, then sometimes a `result` line with subtype
    `error_during_execution`, sometimes none (only the latter was seen); SIGINT before the request is
    sent leaves no transcript at all.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# reply and tool take the rest of their line; the others one word, so "MOCK:sleep=5 MOCK:reply=hi" works.
_DIRECTIVE = re.compile(r"MOCK:(sleep|fail|cost|long|hold)=(\S+)|MOCK:(reply|tool)=([^\n]*)")


@dataclass
class Directives:
    sleep: float = 0.0
    fail: int | None = None
    reply: str | None = None
    tools: list[tuple[str, dict]] = field(default_factory=list)
    output_tokens: int = 7
    long: int | None = None
    hold: str | None = None


def long_reply(chars: int) -> str:
    """`chars` characters of numbered lines ("line 000001 ...\n"): any page of it shows where it came from."""
    out, n = [], 0
    while sum(map(len, out)) < chars:
        n += 1
        out.append(f"line {n:06d} " + "abcdefghij" * 4 + "\n")
    return "".join(out)[:chars]


def _blocks(content: Any) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _tool_result_text(block: dict) -> str:
    inner = block.get("content")
    if isinstance(inner, str):
        return inner
    return "\n".join(str(b.get("text", "")) for b in _blocks(inner) if b.get("type") == "text")


def turn_prompt(messages: list[dict]) -> str:
    """The text prompt that began the current turn: the last non-reminder text block of any user message
    (a request after a tool call ends with the tool_result; the prompt is further back)."""
    for message in reversed(messages or []):
        if isinstance(message, dict) and message.get("role") == "user":
            for block in reversed(_blocks(message.get("content"))):
                if block.get("type") == "text" and not str(block.get("text", "")).startswith("<system-reminder>"):
                    return str(block.get("text", ""))
    return ""


def results_since_prompt(messages: list[dict]) -> int:
    """How many tool results the current turn has had (one per tool call made since its prompt)."""
    count = 0
    for message in reversed(messages or []):
        if not (isinstance(message, dict) and message.get("role") == "user"):
            continue
        blocks = _blocks(message.get("content"))
        count += sum(b.get("type") == "tool_result" for b in blocks)
        if any(b.get("type") == "text" and not str(b.get("text", "")).startswith("<system-reminder>") for b in blocks):
            break
    return count


def current_prompt(messages: list[dict]) -> tuple[str, str | None]:
    """(prompt text, tool result text or None) of this request: the LAST block of the last `role: user`
    message that is not a `<system-reminder>`.

    Not the whole message: after a failed turn claude merges the next prompt into the same user message
    (["first MOCK:fail=400", "second plain"]), so an old directive must not leak into the new turn. Other
    roles are skipped (claude sends `role: "system"` entries too)."""
    for message in reversed(messages or []):
        if not (isinstance(message, dict) and message.get("role") == "user"):
            continue
        for block in reversed(_blocks(message.get("content"))):
            if block.get("type") == "tool_result":
                return "", _tool_result_text(block)
            if block.get("type") == "text" and not str(block.get("text", "")).startswith("<system-reminder>"):
                return str(block.get("text", "")), None
        return "", None
    return "", None


# Each one-value directive: the Directives field it sets and how its text is read (MOCK:tool adds a call).
_FIELDS = {"sleep": ("sleep", float), "fail": ("fail", int), "reply": ("reply", str),
           "cost": ("output_tokens", int), "long": ("long", int), "hold": ("hold", str)}


def parse_directives(text: str) -> Directives:
    d = Directives()
    for word_key, word_value, line_key, line_value in _DIRECTIVE.findall(text):
        key, value = (word_key, word_value) if word_key else (line_key, line_value.strip())
        if key == "tool":
            name, _, raw = value.partition(" ")
            d.tools.append((name, json.loads(raw) if raw.strip() else {}))
        else:
            field_name, read = _FIELDS[key]
            setattr(d, field_name, read(value))
    return d


@dataclass
class LoggedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class MockMessagesServer(ThreadingHTTPServer):
    """The server; `requests` logs every request (method, path, headers, parsed body) in arrival order."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[LoggedRequest] = []
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)  # notified at each logged request
        self.counter = 0
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.held: dict[str, threading.Event] = {}  # MOCK:hold keys -> released
        self.waiting: set[str] = set()  # keys a reply is waiting on now

    def hold_event(self, key: str) -> threading.Event:
        with self.lock:
            event = self.held.setdefault(key, threading.Event())
            if self.stopping.is_set():
                event.set()
            return event

    def release(self, key: str) -> None:
        self.hold_event(key).set()

    def holding(self, key: str) -> bool:
        """Whether a reply is waiting on `key` right now (the test may then look at the turn mid-way)."""
        with self.lock:
            return key in self.waiting

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> MockMessagesServer:
        # shutdown() waits for the loop's next look at its flag: socketserver's 0.5 s made every stop cost that.
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="mock-messages-api", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        with self.lock:
            for event in self.held.values():
                event.set()
        self.shutdown()
        self.server_close()

    def next_number(self) -> int:
        with self.lock:
            self.counter += 1
            return self.counter

    def message_requests(self) -> list[LoggedRequest]:
        with self.lock:
            return self._message_requests_locked()

    def _message_requests_locked(self) -> list[LoggedRequest]:
        return [r for r in self.requests if r.method == "POST" and r.path.split("?")[0] == "/v1/messages"]

    def wait_messages(self, predicate: Callable[[list[LoggedRequest]], Any], timeout: float, what: str) -> Any:
        """Wait until `predicate(message requests so far)` is truthy and return its value, or fail naming `what`
        (woken by each request that arrives)."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while not (value := predicate(self._message_requests_locked())):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out after {timeout}s waiting for {what} (the mock saw "
                                         f"{len(self._message_requests_locked())} message requests)")
                self.arrived.wait(remaining)
            return value


class _Handler(BaseHTTPRequestHandler):
    server: MockMessagesServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the log lives in server.requests
        pass

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _log(self, body: Any) -> None:
        with self.server.lock:
            self.server.requests.append(LoggedRequest(self.command, self.path, dict(self.headers.items()), body))
            self.server.arrived.notify_all()

    def _json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", f"req_mock_{self.server.next_number()}")
        self.end_headers()
        self.wfile.write(data)

    def _not_found(self) -> None:
        self._json(404,
                   {"type": "error", "error": {"type": "not_found_error", "message": f"mock: no route {self.path}"}})

    def do_GET(self) -> None:
        self._log(None)
        self._not_found()

    def do_HEAD(self) -> None:
        self._log(None)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = self._read_body()
        self._log(body)
        route = self.path.split("?")[0]
        if route == "/v1/messages/count_tokens":
            self._json(200, {"input_tokens": max(1, len(json.dumps(body)) // 4)})
        elif route == "/v1/messages" and isinstance(body, dict):
            self._messages(body)
        else:
            self._not_found()

    def _messages(self, body: dict) -> None:
        text, tool_result = current_prompt(body.get("messages") or [])
        d = parse_directives(text)
        if d.fail is not None:
            kind = "api_error" if d.fail >= 500 else "invalid_request_error"
            self._json(d.fail,
                       {"type": "error", "error": {"type": kind, "message": f"mock: asked to fail with {d.fail}"}})
            return
        number = self.server.next_number()
        model = str(body.get("model") or "claude-mock")
        tool = d.tools[0] if d.tools else None
        if tool_result is not None:
            d.reply = "tool said: " + tool_result[:500]
            turn = parse_directives(turn_prompt(body.get("messages") or []))
            done = results_since_prompt(body.get("messages") or [])
            d.hold, tool = turn.hold, turn.tools[done] if done < len(turn.tools) else None
        if d.long is not None:
            d.reply = long_reply(d.long)
        blocks: list[dict] = []
        if tool is not None:
            blocks.append({"type": "tool_use", "id": f"toolu_mock{number:06d}", "name": tool[0], "input": tool[1]})
        else:
            blocks.append({"type": "text", "text": d.reply if d.reply is not None else f"mock reply #{number}"})
        stop_reason = "tool_use" if tool is not None else "end_turn"
        usage = {"input_tokens": 11, "output_tokens": d.output_tokens, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        message = {
            "id": f"msg_mock{number:06d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1},
        }
        if not body.get("stream"):
            self._json(200, {**message, "content": blocks, "stop_reason": stop_reason, "usage": usage})
            return
        self._stream(message, blocks, stop_reason, usage, d.sleep, d.hold if tool is None else None)

    def _stream(self, message: dict, blocks: list[dict], stop_reason: str, usage: dict, sleep: float,
                hold: str | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            self._event("message_start", {"type": "message_start", "message": message})
            self._event("ping", {"type": "ping"})
            if sleep > 0:
                self.server.stopping.wait(sleep)
            if hold:
                self._hold(hold)
            for index, block in enumerate(blocks):
                if block["type"] == "text":
                    self._event("content_block_start", {"type": "content_block_start", "index": index,
                                                        "content_block": {"type": "text", "text": ""}})
                    delta = {"type": "text_delta", "text": block["text"]}
                else:
                    start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                    self._event("content_block_start",
                                {"type": "content_block_start", "index": index, "content_block": start})
                    delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                self._event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
                self._event("content_block_stop", {"type": "content_block_stop", "index": index})
            self._event(
                "message_delta",
                {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                 "usage": {"output_tokens": usage["output_tokens"]}},
            )
            self._event("message_stop", {"type": "message_stop"})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (an interrupted turn): nothing to answer

    def _hold(self, key: str) -> None:
        released = self.server.hold_event(key)
        with self.server.lock:
            self.server.waiting.add(key)
        try:
            released.wait()  # set by release(key) or by stop()
        finally:
            with self.server.lock:
                self.server.waiting.discard(key)

    def _event(self, name: str, data: dict) -> None:
        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()


def claude_env(mock_url: str, scratch: str | Any) -> dict[str, str]:
    """The environment the real CLI needs to run against the mock with no account (docs/design.md, "The claude CLI")."""
    import os
    from pathlib import Path

    root = Path(scratch)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    for sub in ("home", "xdg", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
    env.update(
        HOME=str(root / "home"),
        XDG_RUNTIME_DIR=str(root / "xdg"),
        CLAUDE_CODE_TMPDIR=str(root / "tmp"),
        ANTHROPIC_BASE_URL=mock_url,
        ANTHROPIC_API_KEY="mock-key",
        IS_SANDBOX="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        CLAUDE_CODE_MAX_RETRIES="1",
    )
    return env


if __name__ == "__main__":  # a quick manual probe: `python mock_messages_api.py` then point claude at it
    server = MockMessagesServer().start()
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
