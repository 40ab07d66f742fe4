"""A small stand-in for the `claude` CLI, for fast engine tests of what the real one cannot be made to do on cue.

Why a fake beside the real CLI: the real claude (driven by tests/kit/mock_messages_api.py) is the
reference for every behaviour in test_interop_claude.py; this fake covers the cases it cannot reproduce
deterministically or cheaply: ignoring SIGINT (the SIGKILL escalation), a grandchild in a session of its own,
a crash without a result, a non-zero exit, a slow start. It writes what the daemon reads the same way claude
2.1.328 does (transcript path and entry shapes, stream-json lines), as observed by the interop tests.

The prompt (stdin) steers it:
    FAKE:starting=S       stay S seconds before writing anything (claude still starting: a SIGINT then ends it
                          with no transcript)
    FAKE:sleep=S          sleep S seconds mid-turn (SIGINT: "[Request interrupted by user]", no result line)
    FAKE:gate=PATH        then wait, silent, until PATH exists (kit.gate.Gate: the test says when the turn ends)
    FAKE:ignore-int       ignore SIGINT (only SIGKILL stops it)
    FAKE:exit=N           exit N without a result, after a line on stderr
    FAKE:noresult         exit 0 without a result
    FAKE:error            an API-error result (is_error, api_error_status 500)
    FAKE:grandchild=PATH  start `sleep 300` in a new session (like claude's Bash tool), write its pid to PATH
    FAKE:holdpipe=PATH    the same, but the sleep inherits stdout: it holds the pipe open after we exit
    FAKE:reply=TEXT       the reply text (rest of line)
    FAKE:tool=NAME {JSON} a tool call before the reply (rest of line; several lines: several calls), written as
                          claude writes one: an assistant tool_use entry, then the user entry of its result
Every run appends its argv and prompt to $FAKE_CLAUDE_LOG (JSON lines) when set.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

COST_PER_TURN = 0.01
REPLY_TOKENS = (12, 5)  # the usage of the reply (input, output), as claude's assistant lines carry one


def now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def out(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def option(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def directive(prompt: str, key: str) -> str | None:
    # reply and tool take the rest of the line, others one word
    value = r"[^\n]*" if key in ("reply", "tool") else r"\S*"
    m = re.search(rf"FAKE:{key}(?:=({value}))?", prompt)
    if not m:
        return None
    return m.group(1) if m.group(1) is not None else ""


def main() -> int:
    argv = sys.argv[1:]
    prompt = sys.stdin.read()
    if os.environ.get("FAKE_CLAUDE_LOG"):
        with open(os.environ["FAKE_CLAUDE_LOG"], "a") as f:
            f.write(json.dumps({"argv": argv, "prompt": prompt, "pid": os.getpid()}) + "\n")
    if (starting := directive(prompt, "starting")) is not None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as node before its handlers: the signal ends it
        time.sleep(float(starting))
    if not prompt.strip():
        print("Error: Input must be provided either through stdin or as a prompt argument when using --print",
              file=sys.stderr)
        return 1
    config = Path(os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.environ["HOME"], ".claude"))
    project = config / "projects" / re.sub(r"[^a-zA-Z0-9]", "-", os.getcwd())
    project.mkdir(parents=True, exist_ok=True)
    resume = option(argv, "--resume")
    session_id = resume or option(argv, "--session-id") or str(uuid.uuid4())
    transcript = project / f"{session_id}.jsonl"
    if resume and not transcript.exists():
        print(f"No conversation found with session ID: {resume}", file=sys.stderr)
        return 1
    cost_before = 0.0
    title = option(argv, "--name")
    if resume:
        for line in transcript.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("type") == "cost-state":
                cost_before = entry["totalCostUSD"]
            if entry.get("type") == "custom-title":
                title = entry["customTitle"]
    model = option(argv, "--model") or "fake-model"

    def write(entry: dict) -> None:
        with open(transcript, "a") as f:
            f.write(json.dumps({**entry, "sessionId": session_id}) + "\n")

    if title:
        write({"type": "custom-title", "customTitle": title})
    write({"type": "user", "message": {"role": "user", "content": prompt}, "promptSource": "sdk", "timestamp": now()})

    def finish_interrupted(signum, frame):
        write({"type": "user",
               "message": {"role": "user", "content": [{"type": "text", "text": "[Request interrupted by user]"}]},
               "timestamp": now()})
        sys.exit(0)

    # The handler before the init line: a test that saw init may interrupt at once.
    signal.signal(signal.SIGINT, signal.SIG_IGN if directive(prompt, "ignore-int") is not None else finish_interrupted)
    out({"type": "system", "subtype": "init", "session_id": session_id, "model": model, "cwd": os.getcwd()})
    pidfile = directive(prompt, "grandchild")
    if pidfile:
        child = subprocess.Popen(["sleep", "300"], start_new_session=True, stdout=subprocess.DEVNULL)
        Path(pidfile).write_text(str(child.pid))
    holder = directive(prompt, "holdpipe")
    if holder:  # a process that keeps our stdout open after we exit (and left our group)
        child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        Path(holder).write_text(str(child.pid))
    sleep = directive(prompt, "sleep")
    if sleep:
        deadline = time.monotonic() + float(sleep)
        while time.monotonic() < deadline:  # sleep() restarts after a handled signal; the handler exits
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    gate = directive(prompt, "gate")
    while gate and not Path(gate).exists():
        time.sleep(0.01)
    if directive(prompt, "exit") is not None:
        print("fake claude: failing on request", file=sys.stderr)
        return int(directive(prompt, "exit"))
    if directive(prompt, "noresult") is not None:
        return 0
    total = cost_before + COST_PER_TURN
    if directive(prompt, "error") is not None:
        text = "API Error: 500 fake failure"
        write({"type": "assistant", "isApiErrorMessage": True,
               "message": {"model": "<synthetic>", "role": "assistant", "content": [{"type": "text", "text": text}]},
               "timestamp": now()})
        write({"type": "cost-state", "totalCostUSD": cost_before})
        out({"type": "result", "subtype": "success", "is_error": True, "api_error_status": 500, "result": text,
             "session_id": session_id, "total_cost_usd": cost_before})
        return 1
    for n, call in enumerate(re.findall(r"FAKE:tool=([^\n]*)", prompt)):
        name, _, raw = call.partition(" ")
        use = {"id": f"msg_tool{n}", "model": model, "role": "assistant", "stop_reason": "tool_use",
               "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": json.loads(raw or "{}")}]}
        write({"type": "assistant", "message": use, "timestamp": now()})
        out({"type": "assistant", "message": use, "session_id": session_id})
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "done"}]}
        write({"type": "user", "message": result, "toolUseResult": {}, "timestamp": now()})
        out({"type": "user", "message": result, "session_id": session_id})
    reply = directive(prompt, "reply") or f"fake reply to: {prompt[:40]}"
    message = {"id": f"msg_{uuid.uuid4().hex[:8]}", "model": model, "role": "assistant",
               "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn",
               "usage": {"input_tokens": REPLY_TOKENS[0], "output_tokens": REPLY_TOKENS[1]}}
    write({"type": "assistant", "message": message, "timestamp": now()})
    out({"type": "assistant", "message": message, "session_id": session_id})
    if title:
        write({"type": "custom-title", "customTitle": title})
    write({"type": "cost-state", "totalCostUSD": total})
    out({"type": "result", "subtype": "success", "is_error": False, "result": reply, "session_id": session_id,
         "total_cost_usd": total, "num_turns": 1, "terminal_reason": "completed"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
