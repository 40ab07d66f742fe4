"""The whole stack as an agent uses it: a real `claude -p` turn whose model (the mock Messages API) calls our real
daemons' tools over MCP, with the reference harness sink receiving the todos.

- mcp__bash__run with an inline wait: the model reads the exit code and the output, and no todo is left.
- mcp__bash__run in the background: the model reads `task started`, the completion arrives as a todo.
- mcp__subagent__start: the daemon spawns a nested real claude (against the same mock), and the turn's end
  arrives as a todo carrying the nested session's answer.

The mock stands in for Anthropic's API only (it cannot run here); everything else is the real thing.
"""

import json
import subprocess
from pathlib import Path

import pytest
from daemon_harness import REPO, sink_todos, wait_until
from kit.gate import Gate
from kit.mock_messages_api import claude_env

pytestmark = pytest.mark.interop
BIN = REPO / ".venv" / "bin"


def wait_todo(sink: Path, source: str, key: str, summary_part: str, seconds: float = 60) -> dict:
    def found():
        return next((t for t in sink_todos(sink, strict=False)
                     if (t["source"], t["key"]) == (source, key) and summary_part in t["summary"]), None)
    return wait_until(found, seconds, f"a {source}/{key} todo with {summary_part!r}", interval=0.2)


@pytest.fixture
def stack(daemon_factory, mock_api, claude_bin, sink, tmp_path):
    """Both daemons wired to the sink; turn(prompt) runs one real `claude -p` against them."""
    server = mock_api
    env = claude_env(server.url, tmp_path / "scratch")  # the nested claude talks to the mock too
    workdir = tmp_path / "work"
    workdir.mkdir()
    bash = daemon_factory([str(BIN / "hive-bash-daemon"), "--state-dir", str(tmp_path / "bash-state"),
                           "--agent-socket", str(sink)], env=env)
    subagent = daemon_factory([str(BIN / "hive-subagent-daemon"), "--state-dir", str(tmp_path / "sub-state"),
                               "--agent-socket", str(sink), "--claude-bin", str(claude_bin), "--workdir", str(workdir)],
                              env=env)
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"bash": {"type": "http", "url": bash.url},
                                                 "subagent": {"type": "http", "url": subagent.url}}}))
    env = dict(env, ENABLE_TOOL_SEARCH="false")  # MCP tools go straight into the request's tools (docs/design.md)
    project = tmp_path / "project"
    project.mkdir()

    def turn(prompt: str) -> str:
        """The text of the tool_result that claude sent back to the model."""
        seen = len(server.message_requests())
        proc = subprocess.run([str(claude_bin), "-p", "--strict-mcp-config", "--mcp-config", str(config),
                               "--dangerously-skip-permissions", "--output-format", "json", prompt],
                              cwd=project, env=env, capture_output=True, text=True, timeout=90,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, (
            f"claude -p failed (rc {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        results = [b for r in server.message_requests()[seen:] for m in r.body.get("messages", [])
                   if isinstance(m.get("content"), list) for b in m["content"]
                   if isinstance(b, dict) and b.get("type") == "tool_result"]
        assert results, f"claude sent no tool result back to the model:\n{proc.stdout[-2000:]}"
        texts = [r.get("content") if isinstance(r.get("content"), str)
                 else "".join(b.get("text", "") for b in r.get("content") or []) for r in results]
        turn.results = list(dict.fromkeys(texts))  # every tool result of the turn (later requests repeat them)
        return texts[-1]

    turn.bash_state = tmp_path / "bash-state"
    return turn


def test_agent_runs_a_command_inline_and_reads_the_result(stack, sink):
    text = stack('MOCK:tool=mcp__bash__run {"cmd": "echo from-the-agent; echo oops >&2; exit 3", "name": "inline", '
                 '"wait_seconds": 20}')
    first = text.splitlines()[0]
    assert first.startswith("id=inline status=done exit_code=3"), text
    assert "from-the-agent" in text and "oops" in text
    assert (stack.bash_state / "bash-tasks" / "inline.out").read_text() == "from-the-agent\n"
    assert not [t for t in sink_todos(sink) if t["key"] == "inline"], "a result delivered inline leaves no todo"


def test_agent_backgrounds_a_command_and_the_completion_arrives_as_a_todo(stack, sink, tmp_path):
    gate = Gate(tmp_path)  # the task ends after the turn that started it
    background = {"cmd": f"{gate.wait}; echo late", "name": "bg", "wait_seconds": 0}
    text = stack("MOCK:tool=mcp__bash__run " + json.dumps(background))
    assert text.startswith("task started: id=bg"), text
    gate.open()
    todo = wait_todo(sink, "bash", "bg", "status=done")
    assert "exit_code=0" in todo["summary"]
    assert f"Read({stack.bash_state.resolve() / 'bash-tasks' / 'bg.out'})" in todo["body"]


def test_agent_starts_a_subagent_whose_answer_arrives_as_a_todo(stack, sink, tmp_path):
    recipe = tmp_path / "recipe.md"
    recipe.write_text("You are a careful helper. Answer in one line.\n")
    text = stack(f'MOCK:tool=mcp__subagent__start {{"name": "helper", "prompt_file": "{recipe}", '
                 '"trigger": "MOCK:reply=nested answer 42"}')
    assert "helper" in text and "running" in text, text
    todo = wait_todo(sink, "subagent", "helper", "completed", seconds=90)
    assert "nested answer 42" in todo["body"]


def _bounded(text: str) -> str:
    assert len(text.encode()) < 8 * 1024, f"an answer of {len(text.encode())} bytes reached the model"
    return text


def test_agent_finds_reads_around_and_waits_through_the_views(stack):
    """Issue 13's whole path through real claude: grep a 100 MB output for a marker at line 5,000, read around
    it with from_line, wait on two tasks with ids, start a server with wait_for on its ready line."""
    filler = "yes 'filler output line with some ordinary text in it, nothing to see here 0123456789'"
    big = f"{{ {filler} | head -n 4999; echo MARKER-5000 found; {filler} | head -c 100000000; }}"
    text = _bounded(stack('MOCK:tool=mcp__bash__run ' + json.dumps({"cmd": big, "name": "big", "wait_seconds": 30})))
    assert text.startswith("id=big status=done exit_code=0"), text
    text = _bounded(stack('MOCK:tool=mcp__bash__status {"id": "big", "grep": "MARKER"}'))
    assert "--- grep 'MARKER' in stdout: 1 matching line ---\nstdout:5000: MARKER-5000 found\n" in text, text
    text = _bounded(stack('MOCK:tool=mcp__bash__status {"id": "big", "from_line": 4999, "max_lines": 3}'))
    assert "4999: filler output line" in text and "5000: MARKER-5000 found" in text and "5001: filler" in text, text

    stack('MOCK:tool=mcp__bash__run {"cmd": "sleep 0.5; exit 3", "name": "first", "wait_seconds": 0}')
    stack('MOCK:tool=mcp__bash__run {"cmd": "sleep 60", "name": "second", "wait_seconds": 0}')
    # A claude turn outlasts "first": it has ended before the call, so it ends no wait.
    text = _bounded(stack('MOCK:tool=mcp__bash__status {"ids": ["first", "second"], "wait_seconds": 1}'))
    assert "id=first status=done exit_code=3" in text and "id=second status=running" in text, text
    assert "ended before it: first; still running: second" in text or "ended during this call: first" in text

    server = {"cmd": "echo booting; sleep 0.5; echo 'ready: listening on 127.0.0.1:8080'; sleep 60", "name": "server",
              "wait_for": "ready: listening", "wait_seconds": 20}
    text = _bounded(stack("MOCK:tool=mcp__bash__run " + json.dumps(server)))
    assert text.startswith("task started: id=server\nstatus=running"), text
    assert "wait_for matched (server, stdout line 2): ready: listening on 127.0.0.1:8080" in text


def test_claude_takes_a_streamed_answer_and_its_print_mode_shows_no_progress(daemon_factory, mock_api, claude_bin,
                                                                              tmp_path):
    """Claude Code sends a progressToken with every tools/call and accepts text/event-stream, so a wait that
    prints gets a streamed answer (the daemon's debug log says so); the model then reads the whole result as
    from a JSON answer. Its print mode's stream-json writes no line for an MCP server's progress (it has
    `tool_progress` lines for its own Bash tool and heartbeats only): the interactive view is where it shows."""
    server = mock_api
    env = dict(claude_env(server.url, tmp_path / "scratch"), ENABLE_TOOL_SEARCH="false")
    bash = daemon_factory([str(BIN / "hive-bash-daemon"), "--state-dir", str(tmp_path / "state"),
                           "--log-level", "debug"],
                          env=env)
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"bash": {"type": "http", "url": bash.url}}}))
    project = tmp_path / "project"
    project.mkdir()
    ticking = {"cmd": "for i in 1 2 3; do echo tick-$i; sleep 1; done", "name": "ticks", "wait_seconds": 20}
    proc = subprocess.run([str(claude_bin), "-p", "--strict-mcp-config", "--mcp-config", str(config),
                           "--dangerously-skip-permissions", "--output-format", "stream-json", "--verbose",
                           "MOCK:tool=mcp__bash__run " + json.dumps(ticking)],
                          cwd=project, env=env, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (
        f"claude -p failed (rc {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    assert "answering notifications/progress as an event stream" in bash.log(), bash.log()[-2000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    results = [b for m in lines if m.get("type") == "user" for b in m["message"]["content"]
               if b.get("type") == "tool_result"]
    text = "".join(c.get("text", "") for c in results[0]["content"])
    assert text.startswith("id=ticks status=done exit_code=0") and "tick-1\ntick-2\ntick-3" in text, text
    assert not [m for m in lines if m.get("type") in ("tool_progress", "progress")], (
        "print mode now shows progress: test it")


def test_agent_drives_a_python_repl_on_a_terminal_through_send(stack):
    """Issue 26 through real claude: one turn of three tool calls (three MOCK:tool lines) starts `python3 -i` on a
    tty, defines a value and computes with it through send; every answer the model got is bounded."""
    prompt = "\n".join([
        "MOCK:tool=mcp__bash__run " + json.dumps({"cmd": "python3 -i -q", "stdin": "tty", "name": "repl",
                                                   "wait_for": ">>> $", "wait_seconds": 20}),
        "MOCK:tool=mcp__bash__send " + json.dumps({"id": "repl", "text": "x = 6 * 7", "wait_for": ">>> $",
                                                    "wait_seconds": 20}),
        "MOCK:tool=mcp__bash__send " + json.dumps({"id": "repl", "text": "print(x + 0.5)", "wait_for": ">>> $",
                                                    "wait_seconds": 20}),
    ])
    last = stack(prompt)
    started, defined, computed = stack.results
    assert started.startswith("task started: id=repl") and "wait_for matched" in started, started
    assert defined.startswith("id=repl status=running stdin=tty") and "Traceback" not in defined, defined
    assert computed.startswith("id=repl status=running stdin=tty") and "\n42.5\n" in computed, computed
    assert last == computed and "\x1b" not in computed
    for text in stack.results:
        _bounded(text)
    stack('MOCK:tool=mcp__bash__kill {"id": "repl", "force": true}')


def test_agent_waits_on_an_earlier_ready_line_reads_the_last_lines_and_waits_for_all(stack, tmp_path):
    """Issue 27's path through real claude: a server's ready line printed before the first status still ends
    its wait_for, the last 20 lines of a 100,000-line output, two tasks waited for with all; every answer that
    reached the model is under 8 KiB."""
    gate = Gate(tmp_path)  # the ready line comes after run's answer (which would show it)
    web = {"cmd": f"{gate.wait}; echo Server ready on :8080; sleep 60", "name": "web27", "wait_seconds": 0}
    text = _bounded(stack("MOCK:tool=mcp__bash__run " + json.dumps(web)))
    assert text.startswith("task started: id=web27"), text
    gate.open()
    out = stack.bash_state / "bash-tasks" / "web27.out"
    wait_until(lambda: b"ready" in out.read_bytes(), 20, "the ready line")  # printed before the next call
    text = _bounded(stack('MOCK:tool=mcp__bash__status {"id": "web27", "wait_for": "ready", "wait_seconds": 20}'))
    assert "wait_for matched (web27, stdout line 1): Server ready on :8080" in text, text

    text = _bounded(stack('MOCK:tool=mcp__bash__run {"cmd": "seq 1 100000", "name": "count", "wait_seconds": 30}'))
    assert text.startswith("id=count status=done exit_code=0") and "--- stdout: 100,000 lines," in text, text
    text = _bounded(stack('MOCK:tool=mcp__bash__status {"id": "count", "max_lines": 20}'))
    assert "--- stdout lines 99,981-100,000 of 100,000 (the end of the output) ---\n99981: 99981\n" in text, text
    assert text.rstrip().endswith("100000: 100000") or "100000: 100000\n" in text, text

    stack('MOCK:tool=mcp__bash__run {"cmd": "sleep 2; echo a-done", "name": "all-a", "wait_seconds": 0}')
    stack('MOCK:tool=mcp__bash__run {"cmd": "sleep 4; echo b-done", "name": "all-b", "wait_seconds": 0}')
    text = _bounded(stack('MOCK:tool=mcp__bash__status {"ids": ["all-a", "all-b"], "all": true, "wait_seconds": 30}'))
    assert "id=all-a status=done exit_code=0" in text and "id=all-b status=done exit_code=0" in text, text
    assert "all ended" in text and "  stdout| b-done" in text, text
    stack('MOCK:tool=mcp__bash__kill {"id": "web27", "force": true}')
