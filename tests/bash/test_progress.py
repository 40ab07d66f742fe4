"""What a waiting `run`/`status` streams to a client that asked for progress (the official Python SDK client's
progress_callback, against the real daemon), and what a cancel of such a wait does: it ends at once, frees
its wait slot, the task runs on and its completion todo is still sent."""

import re
import sys
import time
from pathlib import Path

import anyio
import pytest
from daemon_harness import sink_todos, wait_until
from kit.gate import Gate
from mcp.client.client import Client

DAEMON = str(Path(sys.executable).parent / "hive-bash-daemon")
TICKING = "for i in 1 2 3 4 5 6; do echo \"step $i of 6\"; sleep 1; done"


@pytest.fixture
def bash_daemon(daemon_factory, tmp_path):
    def start(*extra):
        return daemon_factory([DAEMON, "--state-dir", str(tmp_path / "state"), "--kill-grace", "0.3", *extra])
    return start


async def _call(url, mode, tool, arguments, progress=True):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((time.monotonic(), progress, total, message))

    async with Client(url, mode=mode) as client:
        result = await client.call_tool(tool, arguments, progress_callback=on_progress if progress else None)
    return seen, result


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_waiting_run_streams_the_tasks_lines(bash_daemon, mode):
    d = bash_daemon()
    seen, result = anyio.run(_call, d.url, mode, "run", {"cmd": TICKING, "wait_seconds": 3})
    assert result.is_error is False and "task started" in result.content[0].text
    assert seen, "no progress during a 3 s wait on a task that prints a line a second"
    messages = [m for _, _, _, m in seen]
    assert any(re.search(r'last: "step \d of 6"', m) for m in messages), messages
    assert all(m.startswith("running ") and len(m) < 200 for m in messages), messages
    assert all(total == 3 for _, _, total, _ in seen)
    progress = [p for _, p, _, _ in seen]
    assert progress == sorted(progress) and len(set(progress)) == len(progress) and progress[-1] <= 3
    times = [t for t, _, _, _ in seen]
    assert all(b - a >= 0.9 for a, b in zip(times, times[1:], strict=False)), (
        f"more than one notification a second: {times}")


@pytest.mark.slow
def test_status_with_wait_for_says_what_it_waits_for(bash_daemon):
    d = bash_daemon()
    _, started = anyio.run(_call, d.url, "2026-07-28", "run", {"cmd": TICKING, "name": "ticks", "wait_seconds": 0})
    seen, result = anyio.run(_call, d.url, "2026-07-28", "status",
                             {"id": "ticks", "wait_seconds": 10, "wait_for": "step 5"})
    assert "step 5" in result.content[0].text
    assert seen and all(m.startswith("waiting for /step 5/ · running ") for _, _, _, m in seen), seen
    assert re.search(r"\d+ lines? · last", seen[-1][3]), seen[-1][3]


@pytest.mark.slow
def test_a_call_without_progress_gets_no_stream(bash_daemon):
    d = bash_daemon()
    seen, result = anyio.run(_call, d.url, "2026-07-28", "run", {"cmd": "echo hi; sleep 1.5", "wait_seconds": 20},
                             False)
    assert seen == [] and "hi" in result.content[0].text and "done" in result.content[0].text


@pytest.mark.slow
def test_a_quick_task_with_a_token_is_answered_without_progress(bash_daemon):
    """Nothing is told in a wait's first second: a task that ends sooner gets its answer alone."""
    d = bash_daemon()
    seen, result = anyio.run(_call, d.url, "legacy", "run", {"cmd": "echo quick", "wait_seconds": 3})
    assert seen == [] and "quick" in result.content[0].text


async def _cancel_then_wait_again(url: str, mode: str):
    first = anyio.Event()

    async def on_progress(progress, total, message):
        first.set()

    async with Client(url, mode=mode) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: client.call_tool("run", {"cmd": "echo a; sleep 30", "name": "long",
                                                             "wait_seconds": 30}, progress_callback=on_progress))
            with anyio.fail_after(10):
                await first.wait()
            group.cancel_scope.cancel()
        cancelled = time.monotonic()
        # One wait slot (--max-inline-waits 1): a later wait waits (is not `busy`) once the cancel gave the
        # slot back. The daemon learns of the cancel a moment after the client sent it (a hang-up is seen by
        # the serving loop), so it may take a few tries; a slot kept to the window's end (30 s) fails here.
        while "busy" in (await client.call_tool("status", {"id": "long", "wait_seconds": 0.2})).content[0].text:
            assert time.monotonic() - cancelled < 5, "the cancelled wait still holds its slot"
        again = await client.call_tool("run", {"cmd": "sleep 0.5; echo second", "wait_seconds": 10})
        answered = time.monotonic()
        listing = await client.call_tool("list", {})
    return again, answered - cancelled, listing


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_cancelled_wait_frees_its_slot_and_the_task_runs_on(bash_daemon, sink, mode):
    d = bash_daemon("--max-inline-waits", "1", "--agent-socket", str(sink))
    again, took, listing = anyio.run(_cancel_then_wait_again, d.url, mode)
    text = again.content[0].text
    assert "second" in text and "busy" not in text and "done" in text, text
    assert took < 5, f"the second wait took {took:.1f}s"
    assert re.search(r"long\s+running", listing.content[0].text), listing.content[0].text
    # The cancelled wait never answered: the task's todo is still on the agent's board.
    todos = wait_until(lambda: [t for t in sink_todos(sink, strict=False) if t["key"] == "long"], 10,
                       "the running todo")
    assert "running" in todos[0]["summary"], todos


@pytest.mark.slow
def test_a_line_after_a_quiet_second_is_told_at_once(bash_daemon):
    """The first line comes 1.5 s into the wait: it is told then, not at the next heartbeat (2 s)."""
    d = bash_daemon()
    seen, _ = anyio.run(_call, d.url, "2026-07-28", "run", {"cmd": "sleep 1.5; echo late; sleep 5", "wait_seconds": 3})
    first = next((p, m) for _, p, _, m in seen if "late" in m)
    assert first[0] < 2.0, f"the line was told at {first[0]}s of the wait, with the heartbeat: {seen}"


def test_the_message_of_a_wait_on_several_tasks(engine, tmp_path):
    from hivebash.answers.wait_progress import WaitTelling

    gate = Gate(tmp_path)  # b prints after a: its line is the last one
    engine.run("echo one; sleep 30", name="a", wait_seconds=0)
    engine.run(f"{gate.wait}; printf 'x\\ny\\n' >&2; sleep 30", name="b", wait_seconds=0)
    wait_until(lambda: engine.status("a", operator=True).view.stdout.text == "one\n", 10, "a's line")
    with engine.registry.locked() as tasks:
        entries = [tasks.get("a"), tasks.get("b")]
    # Made before b prints: its first look (at construction) must not already see b's lines, or no later look
    # finds news (the race CI hit once: the gate opened first).
    telling = WaitTelling(engine.registry, entries, engine.rooms.answers.sources, None, time.monotonic)
    gate.open()
    wait_until(lambda: telling.news() and "3 lines" in telling.message(), 10, "both tasks' output")
    message = telling.message()
    assert message.startswith("first of 2 to end: 2 running · 3 lines · last (b): \"y\""), message
    engine.kill("a", force=True)
    engine.kill("b", force=True)


@pytest.mark.slow
def test_a_waiting_send_streams_what_the_task_prints(bash_daemon):
    """send waits like status: a client that asked for progress sees the task's lines meanwhile."""
    d = bash_daemon()
    anyio.run(_call, d.url, "2026-07-28", "run",
              {"cmd": "read a; " + TICKING, "stdin": "pipe", "name": "fed", "wait_seconds": 0}, False)
    seen, result = anyio.run(_call, d.url, "2026-07-28", "send", {"id": "fed", "text": "go", "wait_seconds": 3})
    assert result.is_error is False and "stdin=pipe" in result.content[0].text
    assert any(re.search(r'last: "step \d of 6"', m) for _, _, _, m in seen), seen
    anyio.run(_call, d.url, "2026-07-28", "kill", {"id": "fed", "force": True}, False)


@pytest.mark.slow
def test_a_reader_that_never_reads_costs_the_slot_for_the_window_only(bash_daemon):
    """A client that sends a streamed call and then reads nothing: the wait still ends with its window (2 s)
    and gives its slot back, though none of the stream was read (the events wait in the socket's buffers)."""
    import json
    import socket
    from urllib.parse import urlsplit

    d = bash_daemon("--max-inline-waits", "1")
    parts = urlsplit(d.url)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "run", "arguments": {"cmd": TICKING, "wait_seconds": 2},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}, "progressToken": "slow"}}}).encode()
    slow = socket.create_connection((parts.hostname, parts.port))
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    slow.sendall((f"POST /mcp HTTP/1.1\r\nHost: {parts.hostname}\r\nContent-Type: application/json\r\n"
                  "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
                  f"Mcp-Method: tools/call\r\nMcp-Name: run\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body)
    sent = time.monotonic()
    try:
        deadline = sent + 6
        while True:  # the slot is the slow call's until its window (2 s) ends; then a wait gets it
            _, listing = anyio.run(_call, d.url, "2026-07-28", "run", {"cmd": "sleep 0.3", "wait_seconds": 5}, False)
            if "busy" not in listing.content[0].text:
                break
            assert time.monotonic() < deadline, "the unread stream kept its wait slot past its window"
        assert "status=done" in listing.content[0].text, listing.content[0].text
    finally:
        slow.close()


def test_a_large_output_is_shown_by_size_until_its_lines_are_counted(engine, monkeypatch):
    """A message reads at most COUNT_BUDGET to count lines: a bigger output is shown by its size, then by its
    count once the later messages have read it all (never a whole GiB in one look)."""
    from hivebash.answers import wait_progress
    from hivebash.answers.wait_progress import WaitTelling

    monkeypatch.setattr(wait_progress, "COUNT_BUDGET", 1 << 20)
    engine.run("seq 1 300000; echo 'last line here'; sleep 30", name="big", wait_seconds=0)  # ~2 MiB
    with engine.registry.locked() as tasks:
        entries = [tasks.get("big")]
    telling = WaitTelling(engine.registry, entries, engine.rooms.answers.sources, None, time.monotonic)
    def written() -> bool:
        telling.news()  # looks at the file's size
        return telling.streams[0].size >= 1_988_910  # seq's 1,988,895 bytes and the last line

    wait_until(written, 10, "all of the output")
    first = telling.message()
    assert "MiB of output" in first and first.endswith('last: "last line here"'), first
    second = telling.message()
    assert "300,001 lines" in second, second
    engine.kill("big", force=True)
