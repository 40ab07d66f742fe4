"""The subagent daemon's examples for docs/: its tool answers and the todo lines it sends, from a real
hive-subagent-daemon driving tests/kit/fake_claude.py (a stand-in that writes what claude 2.1.328 writes:
transcript entries, stream-json lines) through the MCP client (see docs_examples.py)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from bench_support import Daemon
from docs_examples import REPO, Normalizer, RecordingSocket, fenced, scratch, shown_call, wait_until

from common.protocol.client import call_tool

DAEMON = str(Path(sys.executable).parent / "hive-subagent-daemon")
FAKE_CLAUDE = REPO / "tests" / "kit" / "fake_claude.py"
STATE, WORKDIR, HOME = "/var/lib/hive-subagent", "/root/work", "/root"

NORMALIZE_PATTERNS = [
    (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "0b5e2a4c-7d1f-4e8a-9c3b-5f6a7b8c9d0e"),
    (r"\bpid=\d+", "pid=48231"),
    (r'"pid":( ?)\d+', r'"pid":\g<1>48231'),
    (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", "2025-12-01T08:00:00Z"),
    # The stand-in's turns take as long as a Python start on a loaded machine: one fixed figure each.
    (r"\b((?:last_)?(?:elapsed|duration)_s)=[\d.]+", r"\1=3.2"),
    (r'"(elapsed_s|duration_s)":( ?)[\d.]+', r'"\1":\g<2>3.2'),
    (r'"idle_s":( ?)[\d.]+', r'"idle_s":\g<1>0.2'),
    (r"last event [\d.]+s ago", "last event 0.2s ago"),
    (r"\(turn (\d+), \d+s so far\)", r"(turn \1, 0s so far)"),
    (r"\bwaited_s=[\d.]+", "waited_s=3.1"),
    (r'"waited":( ?)[\d.]+', r'"waited":\g<1>3.1'),
    (r"during the wait \([\d.]+s\)", "during the wait (3.1s)"),
    (r"\belapsed_s=[\d.]+", "elapsed_s=3.2"),
    (r"\bidle_s=[\d.]+", "idle_s=0.2"),
]


def call(url: str, tool: str, **arguments) -> str:
    return shown_call(url, tool, arguments)[0]


def examples() -> dict[str, str]:
    with scratch() as root:
        work, home = root / "work", root / "home"
        work.mkdir()
        home.mkdir()
        claude = root / "claude"
        claude.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_CLAUDE}" "$@"\n')
        claude.chmod(0o755)
        prompt = root / "review.md"
        prompt.write_text("Review the files you are given; report problems only.\n")
        sock = RecordingSocket(root / "agent.sock")
        slug = re.sub(r"[^a-zA-Z0-9]", "-", str(work))
        paths = {str(root / "state"): STATE, str(work): WORKDIR, str(home): HOME,
                 slug: re.sub(r"[^a-zA-Z0-9]", "-", WORKDIR), str(prompt): "/root/work/prompts/review.md"}
        argv = [DAEMON, "--state-dir", str(root / "state"), "--workdir", str(work), "--claude-bin", str(claude),
                "--max-running", "2",
                # the answers show what claude's init line says (model=...): wait for it however loaded the
                # machine is (the stand-in's Python start can take longer than the 0.2 s default)
                "--confirm-wait", "10"]
        with Daemon(argv, root / "daemon", env={"HIVE_AGENT_SOCKET": str(sock.path), "HOME": str(home)}) as d:
            out = _drive(d.url, sock, str(prompt))
        sock.close()
    normalize = Normalizer(paths, NORMALIZE_PATTERNS)
    return {name: normalize(text) for name, text in out.items()}


def _drive(url: str, sock: RecordingSocket, prompt: str) -> dict[str, str]:
    out: dict[str, str] = {}
    out["subagent-start"] = call(url, "start", name="review", prompt_file=prompt, model="sonnet",
                                 trigger="FAKE:reply=Reviewed 3 files: no problems found.")
    done = wait_until(lambda: sock.sent(lambda m: m.get("key") == "review" and m.get("op") == "todo.upsert"),
                      "the todo of review's first turn")
    out["subagent-todo-line"] = fenced(done[-1])
    out["subagent-todo-data"] = fenced(json.dumps(json.loads(done[-1])["data"], indent=2), "json")
    out["subagent-status-finished"] = call(url, "status", name="review")
    out["subagent-continue"] = call(url, "continue", name="review", prompt="FAKE:sleep=60 look again", model="sonnet")
    out["subagent-continue-refused"] = call(url, "continue", name="review", prompt="and more")
    # claude has written the turn's prompt to the transcript once its init line is seen
    wait_until(lambda: call_tool(url, "status", {"name": "review"}).data.get("confirmed"),
               "review's second turn to start")
    out["subagent-status-running"] = call(url, "status", name="review")
    out["subagent-interrupt"] = call(url, "interrupt", name="review")
    out["subagent-status-all"] = call(url, "status")
    _bounded_and_waited(url, prompt, out)
    return out


def _bounded_and_waited(url: str, prompt: str, out: dict[str, str]) -> None:
    """A turn with its own caps, waited for, with what it did and its steps; a wait on the first of two; the
    max_running refusal (the daemon runs with --max-running 2 here)."""
    trigger = ("FAKE:sleep=2\n"
               'FAKE:tool=Edit {"file_path": "src/app.py", "old_string": "import os, sys", "new_string": "import os"}\n'
               'FAKE:tool=Bash {"command": "ruff check src"}\nFAKE:reply=Fixed the one lint error, in src/app.py.')
    out["subagent-start-bounded"] = call(url, "start", name="lint", prompt_file=prompt, trigger=trigger, max_turns=40,
                                         timeout_minutes=15)
    out["subagent-status-wait"] = call(url, "status", name="lint", wait_seconds=30)
    out["subagent-status-steps"] = call(url, "status", name="lint", steps=True)
    call(url, "start", name="docs", prompt_file=prompt, trigger="FAKE:sleep=3 FAKE:reply=Docs updated.")
    call(url, "start", name="tests", prompt_file=prompt, trigger="FAKE:sleep=60")
    out["subagent-status-names"] = call(url, "status", names=["docs", "tests"], wait_seconds=30)
    call(url, "start", name="bench", prompt_file=prompt, trigger="FAKE:sleep=60")
    out["subagent-start-refused"] = call(url, "start", name="more", prompt_file=prompt)
    for name in ("tests", "bench"):
        call_tool(url, "interrupt", {"name": name, "force": True})
