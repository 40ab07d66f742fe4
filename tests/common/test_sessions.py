"""The handshake-era session table: idle expiry and the cap, driven by an injected clock (no sleeps).

Why it matters: Claude Code reconnects every turn and never sends DELETE (docs/design.md, "MCP clients"), so
without expiry and a cap the table grows forever; an expired id must simply be unknown (the transport answers 404).
"""

import subprocess
import sys
import threading

import click
import pytest
from daemon_harness import ECHO_SERVER
from kit.clock import FakeClock

from common.config import ServerSettings
from common.protocol.sessions import SessionTable


@pytest.fixture
def clock():
    return FakeClock()


def test_new_session_is_known_and_keeps_its_version(clock):
    table = SessionTable(ttl=60, cap=10, clock=clock)
    session = table.create("2025-06-18")
    assert table.touch(session.id) is session
    assert session.protocol_version == "2025-06-18"
    assert len(session.id) == 32 and all(0x21 <= ord(c) <= 0x7E for c in session.id), "visible ASCII only"
    assert table.create("2025-06-18").id != session.id


def test_idle_session_expires_after_ttl(clock):
    table = SessionTable(ttl=60, cap=10, clock=clock)
    session = table.create("2025-11-25")
    clock.advance(60)
    assert table.touch(session.id) is session, "exactly ttl idle is still alive"
    clock.advance(60.001)
    assert table.touch(session.id) is None
    assert len(table) == 0


def test_use_renews_the_ttl(clock):
    table = SessionTable(ttl=60, cap=10, clock=clock)
    session = table.create("2025-11-25")
    for _ in range(5):
        clock.advance(50)
        assert table.touch(session.id) is session
    clock.advance(61)
    assert table.touch(session.id) is None


def test_expiry_removes_only_the_idle_ones(clock):
    table = SessionTable(ttl=60, cap=10, clock=clock)
    old = table.create("2025-11-25")
    clock.advance(40)
    young = table.create("2025-11-25")
    clock.advance(30)  # old idle 70 s, young idle 30 s
    assert table.touch(old.id) is None
    assert table.touch(young.id) is young
    assert len(table) == 1


def test_cap_evicts_the_least_recently_used(clock):
    table = SessionTable(ttl=3600, cap=3, clock=clock)
    a, b, c = (table.create("2025-11-25") for _ in range(3))
    clock.advance(1)
    table.touch(a.id)  # a is now the most recently used; b the least
    d = table.create("2025-11-25")
    assert len(table) == 3
    assert table.touch(b.id) is None
    assert all(table.touch(s.id) is s for s in (a, c, d))


def test_turn_after_turn_reconnects_stay_bounded(clock):
    """Claude Code's pattern: a new session every turn, never a DELETE."""
    table = SessionTable(ttl=600, cap=50, clock=clock)
    for _ in range(1000):
        table.create("2025-11-25")
        clock.advance(1)
    assert len(table) == 50


def test_create_sweeps_expired_sessions(clock):
    table = SessionTable(ttl=10, cap=100, clock=clock)
    for _ in range(20):
        table.create("2025-11-25")
    clock.advance(11)
    table.create("2025-11-25")
    assert len(table) == 1


def test_end_is_true_once(clock):
    table = SessionTable(ttl=60, cap=10, clock=clock)
    session = table.create("2025-11-25")
    assert table.end(session.id) is True
    assert table.end(session.id) is False
    assert table.touch(session.id) is None
    assert table.end("never-issued") is False


def test_concurrent_creates_respect_the_cap(clock):
    table = SessionTable(ttl=3600, cap=20, clock=clock)
    start = threading.Barrier(8)

    def worker():
        start.wait()
        for _ in range(100):
            table.create("2025-11-25")

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(table) == 20



@pytest.mark.parametrize("knobs,flag",
                         [({"max_sessions": 0}, "--max-sessions"), ({"session_ttl": 0.0}, "--session-ttl"),
                                        ({"session_ttl": -5.0}, "--session-ttl")])
def test_settings_refuse_a_session_table_no_client_could_use(knobs, flag):
    with pytest.raises(click.BadParameter) as info:
        ServerSettings(**knobs).validate()
    assert info.value.param_hint == flag


@pytest.mark.slow
def test_daemon_refuses_max_sessions_zero_at_start(tmp_path):
    """--max-sessions 0 would evict each session as it was created, so every handshake-era client (the
    TypeScript SDK) would get 404 right after initialize: it is refused at start."""
    proc = subprocess.run([sys.executable, str(ECHO_SERVER), "--port", "0", "--max-sessions", "0"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    assert "--max-sessions" in proc.stderr and "Traceback" not in proc.stderr
