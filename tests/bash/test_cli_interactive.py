"""`hive-bash run --stdin`, `hive-bash send` and `hive-bash attach` against a real daemon (real HTTP): the
operator types into a REPL on a tty, attaches with piped input and with a real terminal (a pty: raw mode,
live output, the detach key), and none of it clears the agent's todo."""

import os
import select
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from daemon_harness import sink_todos
from kit.hivebash_testkit import wait_until

from hivebash.cli import main

BIN = Path(sys.executable).parent
DAEMON = str(BIN / "hive-bash-daemon")


@pytest.fixture
def daemon(daemon_factory, tmp_path, sink):
    return daemon_factory([DAEMON, "--state-dir", str(tmp_path / "state"), "--kill-grace", "0.3",
                           "--agent-socket", str(sink)])


def hb(daemon, *args, stdin=None):
    result = CliRunner().invoke(main, ["--url", daemon.url, *args], input=stdin, catch_exceptions=False)
    return result.exit_code, result.output


def test_send_types_into_a_repl_and_exits_with_its_code(daemon, sink):
    code, out = hb(daemon, "run", "--stdin", "tty", "--name", "py", "python3 -i -q")
    assert code == 0 and 'send(id="py"' in out
    # The first prompt, before typing: a slow python's first ">>> " would otherwise match send's wait_for at once.
    code, out = hb(daemon, "status", "py", "--wait", "20", "--wait-for", ">>> $")
    assert code == 0 and ">>> " in out, out
    code, out = hb(daemon, "send", "py", "print(6 * 7)", "--wait-for", ">>> $", "--wait", "20")
    assert code == 0 and "\n42\n" in out and out.startswith("id=py status=running stdin=tty"), out
    code, out = hb(daemon, "send", "py", "--key", "ctrl-d", "--wait", "20")
    assert code == 0 and "status=done" in out.splitlines()[0], out
    code, out = hb(daemon, "send", "py", "more")
    assert code == 1 and "has ended" in out
    assert wait_until(lambda: any(t["key"] == "py" and "status=done" in t["summary"]
                                  for t in sink_todos(sink, strict=False)))
    assert "status=done" in {t["key"]: t for t in sink_todos(sink)}["py"]["summary"]  # the operator cleared nothing


@pytest.mark.slow
def test_send_no_enter_and_eof_on_a_pipe_and_attach_refuses_a_task_without_input(daemon):
    hb(daemon, "run", "--stdin", "pipe", "--name", "cat", "cat")
    hb(daemon, "send", "cat", "abc", "--no-enter", "--wait", "0")
    code, out = hb(daemon, "send", "cat", "def", "--eof", "--wait", "20", "--json")
    assert code == 0 and '"status": "done"' in out
    code, out = hb(daemon, "tail", "cat")
    assert out == "abcdef\n"
    hb(daemon, "run", "--name", "plain", "sleep 300")
    code, out = hb(daemon, "attach", "plain")
    assert code == 1 and "started without input" in out and "tail -f plain" in out
    hb(daemon, "kill", "--force", "plain")


@pytest.mark.slow
def test_attach_with_piped_input_sends_it_and_follows_to_the_end(daemon):
    hb(daemon, "run", "--stdin", "pipe", "--name", "sum", "python3 -c 'import sys; print(sum(map(int, sys.stdin)))'")
    proc = subprocess.run([str(BIN / "hive-bash"), "--url", daemon.url, "attach", "sum"], input="1\n2\n39\n",
                          capture_output=True, text=True, timeout=60)  # a real process: attach reads its stdin's fd
    assert proc.returncode == 0 and proc.stdout == "42\n", proc
    assert "[task sum ended: status=done exit_code=0]" in proc.stderr


@pytest.mark.slow
def test_attach_with_piped_input_says_when_the_task_asks(daemon):
    hb(daemon, "run", "--stdin", "tty", "--name", "ask", 'read -p "Name? " n; echo "hi $n"')
    attach = subprocess.Popen([str(BIN / "hive-bash"), "--url", daemon.url, "attach", "ask"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    said = bytearray()

    def told() -> bool:
        while select.select([attach.stderr], [], [], 0.05)[0]:
            chunk = os.read(attach.stderr.fileno(), 65536)
            if not chunk:
                break
            said.extend(chunk)
        return b'[ask is waiting for input: "Name? "]' in said

    try:
        assert wait_until(told, timeout=20), bytes(said)
        out, rest = attach.communicate(b"ann\n", timeout=60)
        said.extend(rest)
    finally:
        if attach.poll() is None:
            attach.kill()
            attach.wait()
    assert attach.returncode == 0 and b"hi ann" in out, (out, bytes(said))
    assert said.count(b"waiting for input") == 1, bytes(said)


@pytest.mark.slow
def test_attach_on_a_terminal_shows_output_live_sends_keys_and_detaches(daemon):
    """The operator's side on a real pty: raw mode (keys as pressed), the task's echo and answers live, ctrl-]
    detaches and leaves the task running."""
    hb(daemon, "run", "--stdin", "tty", "--name", "repl", "python3 -i -q")
    master, slave = os.openpty()
    attach = subprocess.Popen([str(BIN / "hive-bash"), "--url", daemon.url, "attach", "repl"], stdin=slave,
                              stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = bytearray()

    def screen_has(text: bytes) -> bool:
        while select.select([master], [], [], 0.05)[0]:
            try:
                seen.extend(os.read(master, 65536))
            except OSError:
                break
        return text in seen

    try:
        assert wait_until(lambda: screen_has(b"ctrl-] detaches"), timeout=20), bytes(seen)
        os.write(master, b"7 * 6\r")
        assert wait_until(lambda: screen_has(b"42"), timeout=20), bytes(seen)
        os.write(master, b"\x1d")
        assert attach.wait(20) == 0
        assert screen_has(b"detached from repl; it keeps running"), bytes(seen)
    finally:
        if attach.poll() is None:
            attach.kill()
            attach.wait()
        os.close(master)
    code, out = hb(daemon, "status", "repl")
    assert "status=running" in out
    hb(daemon, "kill", "--force", "repl")


def test_help_teaches_send_and_attach():
    result = CliRunner().invoke(main, ["send", "--help"])
    code, out = result.exit_code, result.output
    assert code == 0 and "--key" in out and "--eof" in out and "--no-enter" in out and "hive-bash send py" in out
    result = CliRunner().invoke(main, ["attach", "--help"])
    assert result.exit_code == 0 and "ctrl-]" in result.output


@pytest.mark.slow
def test_a_daemon_that_leads_its_session_never_takes_a_tasks_terminal(daemon_factory, tmp_path):
    """systemd starts a service as a session leader with no terminal: opening a tty task's pseudo-terminal must
    not make it the daemon's (the daemon opens both ends O_NOCTTY), or the task could not take it."""
    leader = daemon_factory(["setsid", DAEMON, "--state-dir", str(tmp_path / "state")])  # setsid(1) execs in place
    pid = leader.proc.pid
    assert os.getsid(pid) == pid
    hb(leader, "run", "--stdin", "tty", "--name", "py", "python3 -i -q")
    code, out = hb(leader, "status", "py", "--wait", "20", "--wait-for", ">>> $")  # the first prompt (as above)
    assert code == 0 and ">>> " in out, out
    code, out = hb(leader, "send", "py", "os_ok = 1 + 1; print(os_ok)", "--wait-for", ">>> $", "--wait", "20")
    assert code == 0 and "\n2\n" in out, out
    with open(f"/proc/{pid}/stat") as f:
        tty_nr = int(f.read().rsplit(")", 1)[1].split()[4])
    assert tty_nr == 0, "the daemon took a task's terminal as its own"
    hb(leader, "kill", "--force", "py")
