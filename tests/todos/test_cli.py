"""The `hive-todos` command: the reference sink as a real subprocess, the client commands through click's
CliRunner against it, exit codes, messages, and the sink's answers to requests that break the protocol."""

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from common.todos.cli import main

SINK_BIN = Path(sys.executable).parent / "hive-todos"


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def raw_exchange(path: Path, *lines: bytes) -> list[dict]:
    """Send `lines` on one connection, then read one reply per line."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(str(path))
        sock.sendall(b"".join(lines))
        reader = sock.makefile("rb")
        return [json.loads(reader.readline()) for _ in lines]


def test_sink_lists_what_was_sent_and_forgets_what_was_cleared(sink_factory):
    sink = sink_factory()
    sock = str(sink.socket_path)
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    r = run("upsert", "--socket", sock, "--source", "bash", "--key", "t1", "--summary", "done exit=0",
            "--body", "Read(/h/t1.out)", "--data", '{"exit_code": 0}')
    assert (r.exit_code, r.output) == (0, "ok\n")
    run("upsert", "--socket", sock, "--source", "subagent", "--key", "review", "--summary", "turn finished")
    table = run("list", "--socket", sock)
    assert table.exit_code == 0
    lines = table.output.splitlines()
    assert lines[0].split() == ["SOURCE", "KEY", "AGE", "SUMMARY"]
    assert lines[1].split()[:2] == ["bash", "t1"] and lines[1].endswith("done exit=0")
    assert lines[2].split()[:2] == ["subagent", "review"]
    todos = json.loads(run("list", "--json", env={"HIVE_AGENT_SOCKET": sock}).output)
    assert [(t["source"], t["key"], t["body"], t["data"]) for t in todos] == [
        ("bash", "t1", "Read(/h/t1.out)", {"exit_code": 0}), ("subagent", "review", "", {})]
    assert run("clear", "--socket", sock, "--source", "bash", "--key", "t1").exit_code == 0
    assert [t["key"] for t in json.loads(run("list", "--socket", sock, "--json").output)] == ["review"]
    assert sink.changes(3)[-1] == ("clear", "t1")


def test_list_says_clearly_when_the_socket_is_unreachable(short_dir):
    missing = short_dir / "nobody.sock"
    r = CliRunner().invoke(main, ["list", "--socket", str(missing)])
    assert r.exit_code == 3
    assert f"cannot connect to {missing}" in r.output and "hive-todos serve" in r.output
    r = CliRunner().invoke(main, ["list"], env={"HIVE_AGENT_SOCKET": None})
    assert r.exit_code == 2 and "--socket: required (or set HIVE_AGENT_SOCKET)" in r.output
    r = CliRunner().invoke(main, ["list", "--socket", "/tmp/" + "x" * 120])
    assert r.exit_code == 2 and "at most 107" in r.output


def test_list_against_a_harness_without_todo_list_exits_1(fake_harness):
    harness = fake_harness(lambda n, request: b'{"ok":false,"error":"op: unknown"}\n')
    r = CliRunner().invoke(main, ["list", "--socket", str(harness.path)])
    assert r.exit_code == 1 and "op: unknown" in r.output
    assert harness.requests == [{"op": "todo.list"}]


def test_serve_prints_readable_changes_and_stops_cleanly_on_sigterm(short_dir):
    path = short_dir / "agent.sock"
    proc = subprocess.Popen([str(SINK_BIN), "serve", "--socket", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        first = proc.stdout.readline()  # printed once it listens
        assert first.startswith(f"hive-todos: serving {path}"), first
        r = run("upsert", "--socket", str(path), "--source", "bash", "--key", "t1", "--summary", "done exit=0",
                "--body", "first line\nsecond line")
        assert r.exit_code == 0, r.output
        assert run("clear", "--socket", str(path), "--source", "bash", "--key", "t1").exit_code == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=15)
    assert proc.returncode == 0
    assert not path.exists(), "the socket file is removed on exit"
    assert "upsert bash/t1  done exit=0\n    first line\n    second line\n" in rest
    assert "clear  bash/t1\n" in rest


def test_serve_stops_on_a_sigterm_its_serving_thread_takes(short_dir):
    """The kernel may hand a process's signal to any of its threads; one taken by the serving thread must still
    stop the sink (it once left the main thread asleep for good: the wakeup fd in serve_until_signalled)."""
    path = short_dir / "agent.sock"
    proc = subprocess.Popen([str(SINK_BIN), "serve", "--socket", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout.readline().startswith("hive-todos: serving"), "the sink did not start"
        threads = sorted(int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid)
        assert threads, "the sink serves from a thread of its own"
        os.kill(threads[0], signal.SIGTERM)  # a tid that is not the leader's: that thread takes the signal
        proc.wait(5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and not path.exists()


def test_serve_refuses_a_path_that_is_not_a_socket(short_dir):
    path = short_dir / "precious.txt"
    path.write_text("keep me")
    r = CliRunner().invoke(main, ["serve", "--socket", str(path)])
    assert r.exit_code == 1 and "not a socket" in r.output
    assert path.read_text() == "keep me"


def test_serve_refuses_a_socket_someone_listens_on(sink_factory):
    sink = sink_factory()
    r = CliRunner().invoke(main, ["serve", "--socket", str(sink.socket_path)])
    assert r.exit_code == 1 and "already listening" in r.output
    assert run("list", "--socket", str(sink.socket_path)).exit_code == 0, "the live sink is untouched"


def test_serve_replaces_a_stale_socket(short_dir, sink_factory):
    path = short_dir / "agent.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens: what a crashed harness leaves
    sink = sink_factory(path)
    assert run("list", "--socket", str(sink.socket_path)).output == "no todos\n"


def test_serve_needs_a_socket():
    r = CliRunner().invoke(main, ["serve"], env={"HIVE_AGENT_SOCKET": None})
    assert r.exit_code == 2 and "--socket" in r.output


@pytest.mark.parametrize(
    "line, error",
    [
        (b"not json\n", "request: not a JSON line"),
        (b"[1, 2]\n", "request: must be a JSON object"),
        (b'{"op": "todo.delete", "key": "k", "source": "bash"}\n', "op: must be one of"),
        (b'{"op": "todo.clear", "source": "bash"}\n', "key: must be a non-empty string"),
        (b'{"op": "todo.upsert", "key": "k", "source": "", "summary": "s", "body": ""}\n',
         "source: must be a non-empty"),
        (b'{"op": "todo.upsert", "key": "k", "source": "bash", "body": ""}\n', "summary: must be a string"),
        (b'{"op": "todo.upsert", "key": "k", "source": "bash", "summary": "s", "body": "", "data": [1]}\n',
         "data: must be a JSON object"),
    ],
)
def test_sink_answers_bad_requests_with_an_error_naming_the_field(sink_factory, line, error):
    sink = sink_factory()
    [reply] = raw_exchange(sink.socket_path, line)
    assert reply["ok"] is False and reply["error"].startswith(error)
    assert run("list", "--socket", str(sink.socket_path)).output == "no todos\n"


def test_sink_serves_several_requests_on_one_connection_in_order(sink_factory):
    sink = sink_factory()
    upsert = {"op": "todo.upsert", "key": "k", "source": "bash", "summary": "s", "body": "b", "extra": "ignored"}
    replies = raw_exchange(sink.socket_path, json.dumps(upsert).encode() + b"\n", b'{"op":"todo.list"}\n',
                           b'{"op":"todo.clear","key":"k","source":"bash"}\n', b'{"op":"todo.list"}\n')
    assert [r["ok"] for r in replies] == [True] * 4
    assert [t["key"] for t in replies[1]["todos"]] == ["k"] and replies[3]["todos"] == []


def test_sink_refuses_a_line_over_the_limit(sink_factory):
    sink = sink_factory()
    [reply] = raw_exchange(sink.socket_path, b"x" * (1024 * 1024 + 10) + b"\n")
    assert reply == {"ok": False, "error": "request: longer than 1048576 bytes"}


def test_help_teaches_the_commands_and_exit_codes():
    r = run("--help")
    assert r.exit_code == 0
    for word in ("serve", "list", "upsert", "clear", "HIVE_AGENT_SOCKET", "todo-protocol.md", "Exit codes"):
        assert word in r.output
    assert "socket file is created 0600" in run("serve", "--help").output


def test_serve_keeps_serving_when_its_output_is_closed(short_dir):
    """`hive-todos serve | head -1`: a broken stdout must stop the printing, not the socket."""
    path = short_dir / "agent.sock"
    proc = subprocess.Popen([str(SINK_BIN), "serve", "--socket", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline().startswith(b"hive-todos: serving")
        proc.stdout.close()
        for key in ("a", "b"):
            r = run("upsert", "--socket", str(path), "--source", "bash", "--key", key, "--summary", "s")
            assert r.exit_code == 0, r.output
        assert [t["key"] for t in json.loads(run("list", "--socket", str(path), "--json").output)] == ["a", "b"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
    assert b"Traceback" not in proc.stderr.read()


def test_outbox_shows_what_waits_undelivered_without_touching_it(short_dir):
    from common.todos.delivery import TodoDelivery

    state = short_dir / "state"
    for source, key, summary in (("bash", "t1", "done exit=0"), ("subagent", "review", "turn finished")):
        le = TodoDelivery(source, state, None)
        le.upsert(key, summary, "body")
        le.close()
    TodoDelivery("bash", state, None).clear("t9")
    journal = state / "todos" / "bash" / "outbox.jsonl"
    before = journal.read_bytes()
    table = run("outbox", str(state))
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[0].split() == ["SOURCE", "KEY", "OP", "SUMMARY"]
    assert [line.split()[:3] for line in lines[1:]] == [["bash", "t1", "upsert"], ["bash", "t9", "clear"],
                                                         ["subagent", "review", "upsert"]]
    assert lines[1].endswith("done exit=0")
    only = json.loads(run("outbox", str(state), "--source", "bash", "--json").output)
    assert [(e["key"], e["message"]["op"]) for e in only] == [("t1", "todo.upsert"), ("t9", "todo.clear")]
    assert journal.read_bytes() == before, "reading the outbox must not change it"
    empty = short_dir / "empty"
    empty.mkdir()
    r = run("outbox", str(empty))
    assert r.exit_code == 3 and "no outbox under" in r.output
