"""TodoDelivery against the real reference sink (`hive-todos serve` as a subprocess): delivery, the outbox
while the harness is down, a daemon killed with undelivered todos, and the upsert/clear coalescing rules."""

import logging
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from daemon_harness import sink_todos

from common.todos.delivery import TodoDelivery
from common.todos.outbox import JOURNAL_NAME, read_journal

REPO = Path(__file__).resolve().parents[2]


def outbox_dir(short_dir: Path, source: str = "bash") -> Path:
    return short_dir / "state" / "todos" / source


def outbox_keys(short_dir: Path) -> list[str]:
    """The keys the outbox journal holds pending (read without side effects, as a restart would read it)."""
    return sorted(read_journal(outbox_dir(short_dir) / JOURNAL_NAME))


def outbox_message(short_dir: Path, key: str) -> dict:
    return read_journal(outbox_dir(short_dir) / JOURNAL_NAME)[key].message


def test_upsert_and_clear_reach_the_sink(sink_factory, make_todos, short_dir):
    sink = sink_factory()
    le = make_todos(sink.socket_path)
    assert le.upsert("t1", "done exit=0", "Read(/h/t1.out)", {"exit_code": 0, "paths": ["/h/t1.out"]})
    assert le.flush(20)
    [todo] = sink_todos(sink.socket_path)
    assert (todo["source"], todo["key"], todo["summary"]) == ("bash", "t1", "done exit=0")
    assert todo["body"] == "Read(/h/t1.out)"
    assert todo["data"] == {"exit_code": 0, "paths": ["/h/t1.out"]}
    assert le.clear("t1") and le.flush(20)
    assert sink_todos(sink.socket_path) == []
    assert sink.changes(2) == [("upsert", "t1", "done exit=0"), ("clear", "t1")]
    assert outbox_keys(short_dir) == [], "delivered todos must leave the outbox"


def test_harness_down_at_completion_then_started_later_arrives_once(sink_factory, make_todos, short_dir):
    socket_path = short_dir / "agent.sock"
    le = make_todos(socket_path)
    assert le.upsert("t1", "done exit=3", "Read(/h/t1.err)", {"exit_code": 3})
    assert not le.flush(0), "nothing listens: it cannot have been delivered"
    assert le.status()["pending"] == 1
    # Kept on disk, private: directories 0700, the file 0600.
    assert outbox_keys(short_dir) == ["t1"]
    assert stat.S_IMODE(outbox_dir(short_dir).stat().st_mode) == 0o700
    assert stat.S_IMODE(outbox_dir(short_dir).parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((outbox_dir(short_dir) / JOURNAL_NAME).stat().st_mode) == 0o600

    sink = sink_factory(socket_path)
    assert le.flush(20)
    # A sentinel sent after it: delivery is one request at a time, so a duplicate would have come before it.
    assert le.upsert("sentinel", "s", "") and le.flush(20)
    assert sink.changes(2) == [("upsert", "t1", "done exit=3"), ("upsert", "sentinel", "s")]
    assert outbox_keys(short_dir) == []


def test_a_new_todo_wakes_the_backoff_wait(sink_factory, make_todos, short_dir):
    socket_path = short_dir / "agent.sock"
    le = make_todos(socket_path, backoff_initial=3600, backoff_max=3600)
    le.upsert("a", "first", "")
    assert le.wait_until(lambda: le.status()["last_error"], 20), "the first attempt did not fail"
    sink = sink_factory(socket_path)
    le.upsert("b", "second", "")  # without the wake-up both would wait an hour
    sink.wait_event(lambda e: e.get("key") == "b", "todo b")
    assert sink.changes(2) == [("upsert", "a", "first"), ("upsert", "b", "second")]


def test_close_wakes_the_backoff_wait_and_keeps_the_outbox(make_todos, short_dir):
    le = make_todos(short_dir / "nobody.sock", backoff_initial=3600, backoff_max=3600)
    le.upsert("a", "first", "")
    assert le.wait_until(lambda: le.status()["last_error"], 20), "the first attempt did not fail"
    le.close(timeout=30)
    assert le.status()["state"] == "closed" and not le.status()["thread_alive"]
    assert outbox_keys(short_dir) == ["a"]
    assert le.upsert("b", "after close", ""), "after close todos still go to the outbox, for the next start"
    assert outbox_keys(short_dir) == ["a", "b"]


DAEMON = """
import sys
from pathlib import Path
from common.todos.delivery import TodoDelivery
le = TodoDelivery("bash", Path(sys.argv[1]), Path(sys.argv[2]), backoff_initial=3600)
le.upsert("t1", "done exit=0", "Read(t1.out)", {"exit_code": 0})
le.upsert("t2", "running", "")
le.upsert("t2", "done exit=1", "Read(t2.err)", {"exit_code": 1})
le.upsert("t3", "running", "")
le.clear("t3")
print("queued", flush=True)
sys.stdin.read()
"""


def test_daemon_killed_with_undelivered_todos_then_restarted(sink_factory, make_todos, short_dir):
    socket_path = short_dir / "agent.sock"
    child = subprocess.Popen([sys.executable, "-c", DAEMON, str(short_dir / "state"), str(socket_path)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO)
    try:
        assert child.stdout.readline() == b"queued\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    assert outbox_keys(short_dir) == ["t1", "t2", "t3"]

    sink = sink_factory(socket_path)
    le = make_todos(socket_path)
    assert le.flush(20)
    # In the order of their last change; t2 only in its newest state. t3's upsert never went out, but the
    # killed process may have sent an earlier one, so its clear is sent, never its upsert.
    assert sink.changes(3) == [("upsert", "t1", "done exit=0"), ("upsert", "t2", "done exit=1"), ("clear", "t3")]
    assert [(t["key"], t["data"]) for t in sink_todos(socket_path)] == [("t1", {"exit_code": 0}),
                                                                        ("t2", {"exit_code": 1})]
    assert outbox_keys(short_dir) == []


def test_outbox_holds_the_newest_state_of_each_key(make_todos, short_dir):
    le = make_todos(None)
    for n in range(50):
        le.upsert("busy", f"step {n}", f"body {n}", {"n": n})
    assert outbox_keys(short_dir) == ["busy"]
    message = outbox_message(short_dir, "busy")
    assert message["summary"] == "step 49" and message["data"] == {"n": 49}


def test_the_journal_is_rewritten_when_it_grows_and_keeps_what_is_pending(make_todos, short_dir, monkeypatch):
    monkeypatch.setattr("common.todos.outbox.COMPACT_MIN_LINES", 8)
    le = make_todos(None)
    for key in ("k0", "k1", "k2"):
        le.upsert(key, f"todo {key}", "")
    for n in range(200):
        le.upsert("busy", f"step {n}", "")
    le.clear("k1")  # an earlier process may have sent a k1: the clear replaces the upsert and stays pending
    journal = outbox_dir(short_dir) / JOURNAL_NAME
    lines = journal.read_bytes().count(b"\n")
    assert lines <= 17, f"{lines} lines for 4 pending keys: the journal was not rewritten"
    assert outbox_keys(short_dir) == ["busy", "k0", "k1", "k2"]
    assert outbox_message(short_dir, "busy")["summary"] == "step 199"
    assert outbox_message(short_dir, "k1")["op"] == "todo.clear"
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    assert sorted(p.name for p in outbox_dir(short_dir).iterdir()) == [JOURNAL_NAME], "no temp file left behind"


def test_clear_of_a_key_the_harness_knows_nothing_of_sends_nothing(sink_factory, make_todos, short_dir):
    socket_path = short_dir / "agent.sock"
    sink = sink_factory(socket_path)
    le = make_todos(socket_path)
    le.upsert("k", "v1", "")
    le.clear("k")
    assert le.flush(20)  # the clear is acknowledged: this process now knows the harness holds nothing for k
    assert sink.stop() == 0
    le.upsert("k", "v2", "")  # cannot be delivered now
    assert outbox_keys(short_dir) == ["k"]
    # Its failed attempt over first: under load the thread may still be on the wire, and then the clear must stay.
    assert le.wait_until(lambda: not le.status()["busy"], 20)
    le.clear("k")  # the upsert never left: both vanish
    assert le.status()["pending"] == 0 and outbox_keys(short_dir) == []
    sink2 = sink_factory(socket_path)
    assert le.upsert("sentinel", "s", "") and le.flush(20)
    assert sink2.changes(1) == [("upsert", "sentinel", "s")]


def test_clear_after_a_delivered_upsert_is_still_sent(sink_factory, make_todos, short_dir):
    socket_path = short_dir / "agent.sock"
    sink = sink_factory(socket_path)
    le = make_todos(socket_path)
    le.upsert("k", "v1", "")
    assert le.flush(20)
    assert sink.stop() == 0
    le.upsert("k", "v2", "")
    le.clear("k")  # v2 is dropped, but the harness holds v1: the clear must go out
    assert outbox_keys(short_dir) == ["k"]
    assert outbox_message(short_dir, "k")["op"] == "todo.clear"
    sink2 = sink_factory(socket_path)
    assert le.flush(20)
    assert sink2.changes(1) == [("clear", "k")]


def test_no_socket_keeps_todos_in_the_outbox_and_the_log(make_todos, short_dir, caplog):
    caplog.set_level(logging.DEBUG, logger="common.todos.delivery")
    le = make_todos(None)
    assert le.upsert("t1", "done exit=0", "Read(x)")
    assert le.flush(5) is False  # answers at once: nothing can be delivered
    assert outbox_keys(short_dir) == ["t1"]
    said_once = [r for r in caplog.records if r.levelno == logging.INFO and "no harness socket" in r.getMessage()]
    assert len(said_once) == 1 and JOURNAL_NAME in said_once[0].getMessage()
    assert any(r.levelno == logging.DEBUG and "bash/t1 done exit=0" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "args, rule",
    [
        (("Bad Key", "s", ""), "key:"),
        (("k", 3, ""), "summary: must be a string"),
        (("k", "s", None), "body: must be a string"),
        (("k", "s", "", ["not", "an", "object"]), "data: must be a JSON object"),
        (("k", "s", "", {"when": object()}), "data: must be JSON-serialisable"),
        (("k", "s", "", {"x": float("nan")}), "data: must be JSON-serialisable"),
        (("k", "s", "x" * (1024 * 1024 + 1)), "at most 1048576"),
    ],
)
def test_bad_todos_are_refused_with_a_log_never_raised(make_todos, short_dir, caplog, args, rule):
    le = make_todos(None)
    assert le.upsert(*args) is False
    assert rule in caplog.text
    assert le.status()["pending"] == 0 and outbox_keys(short_dir) == []
    assert le.clear("../etc") is False


def test_any_mapping_is_data_as_upsert_declares_it(make_todos, short_dir):
    """Todos.upsert takes a Mapping (an answer's TypedDict goes in uncopied); one that is not a dict is sent
    as the same JSON object."""
    from types import MappingProxyType

    le = make_todos(None)
    assert le.upsert("k", "s", "", MappingProxyType({"b": 1, "a": [2]}))
    assert outbox_message(short_dir, "k")["data"] == {"b": 1, "a": [2]}


def test_summary_line_breaks_are_folded(make_todos, short_dir):
    le = make_todos(None)
    assert le.upsert("k", "two\nlines", "body\nstays")
    message = outbox_message(short_dir, "k")
    assert (message["summary"], message["body"]) == ("two lines", "body\nstays")


def test_unreadable_outbox_lines_are_skipped_and_the_rest_delivered(sink_factory, make_todos, short_dir, caplog):
    first = make_todos(None)
    first.upsert("good", "kept", "")
    first.upsert("lost", "its source does not match", "")
    first.close()
    journal = outbox_dir(short_dir) / JOURNAL_NAME
    text = journal.read_text()
    assert '"key": "lost", "source": "bash"' in text
    text = text.replace('"key": "lost", "source": "bash"', '"key": "lost", "source": "other"')
    journal.write_text(text + '["not", "an", "entry"]\n{"seq": 9, "key": "torn", "mess')  # a power cut mid-write
    sink = sink_factory()
    le = make_todos(sink.socket_path)
    assert le.flush(20)
    assert sink.changes(1) == [("upsert", "good", "kept")]
    assert outbox_keys(short_dir) == []
    assert "line 3 is unreadable" in caplog.text and "line 4 is unreadable" in caplog.text
    assert "the entry for 'lost' is unusable" in caplog.text


def test_two_sources_share_a_state_dir_without_mixing(sink_factory, make_todos, short_dir):
    bash = make_todos(None, source="bash")
    sub = make_todos(None, source="subagent")
    bash.upsert("same", "from bash", "")
    sub.upsert("same", "from subagent", "")
    bash.close(), sub.close()
    sink = sink_factory()
    again = [make_todos(sink.socket_path, source=s) for s in ("bash", "subagent")]
    assert all(le.flush(20) for le in again)
    assert sorted((t["source"], t["summary"]) for t in sink_todos(sink.socket_path)) == [
        ("bash", "from bash"), ("subagent", "from subagent")]


def test_a_bad_source_is_a_startup_error(short_dir):
    with pytest.raises(ValueError, match="source"):
        TodoDelivery("Bash!", short_dir / "state", None)


def test_an_unusable_state_dir_keeps_todos_in_memory(make_todos, short_dir, caplog):
    (short_dir / "state").write_text("a file where the state directory should be")
    le = make_todos(None)
    assert le.upsert("k", "s", "")
    assert le.status()["pending"] == 1  # in memory: there is no journal to keep it in
    assert "kept in memory only" in caplog.text
    assert os.path.isfile(short_dir / "state")


def test_the_minimal_harness_in_the_protocol_doc_works(make_todos, short_dir):
    """The doc promises a harness author can start from its example: run it, and deliver to it."""
    doc = (REPO / "docs" / "todo-protocol.md").read_text()
    example = doc.split("```python\n", 1)[1].split("```", 1)[0]
    socket_path = short_dir / "doc.sock"
    proc = subprocess.Popen([sys.executable, "-c", example], env=dict(os.environ, HIVE_AGENT_SOCKET=str(socket_path)),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        le = make_todos(socket_path)
        le.upsert("t1", "done", "")
        le.upsert("t2", "done", "")
        le.clear("t1")
        assert le.flush(30), (le.status(), proc.poll())  # retries (with backoff) until the example listens
        le.clear("never-seen")
        assert le.flush(30)
    finally:
        proc.terminate()
        proc.wait(10)
    assert b"Traceback" not in proc.stderr.read()


def test_a_large_outbox_is_read_back_whole(make_todos, short_dir):
    """Thousands of undelivered todos (a harness away for long): the journal of several MiB is rewritten at
    start and every entry comes back, newest state per key, in order."""
    first = make_todos(None)
    body = "b" * 2000
    for n in range(3000):
        first.upsert(f"task-{n}", f"done {n}", body, {"n": n})
    first.close()
    assert (outbox_dir(short_dir) / JOURNAL_NAME).stat().st_size > 6 * 2**20
    again = make_todos(None)
    assert again.status()["pending"] == 3000, "every pending todo read back at start"
    keys = list(read_journal(outbox_dir(short_dir) / JOURNAL_NAME))
    assert len(keys) == 3000 and keys[:2] == ["task-0", "task-1"] and keys[-1] == "task-2999"
    assert outbox_message(short_dir, "task-1234")["data"] == {"n": 1234}
