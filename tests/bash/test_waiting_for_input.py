"""A task that waits for input, known from /proc (hivebash/stdin/blocked_read.py, processes/input_watch.py): the
waits of run, status and send end at it, the answers say what it asks, list marks it, and a task that asks
while no call waits on it updates its todo once. Real programs on real pipes and terminals: python3 -i,
bash's `read -p` and `read`, getpass, an apt-style [Y/n] script, a reader without a prompt, and a busy
program that printed a prompt-like line (not waiting)."""

import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from daemon_harness import start_daemon, wait_until
from kit.gate import Gate
from kit.sdk_agent import SdkAgent, bash_daemon_argv
from kit.sink import running_sink

from common.protocol.tools import CallContext
from common.waiting import wait_for
from hivebash.processes import input_watch
from hivebash.stdin import blocked_read
from hivebash.tools import build_registry

AGENT = CallContext(structured=True)
WINDOW = 20  # seconds: every wait here that ends at the input ends long before it


@pytest.fixture
def tools(engine):
    return build_registry(engine)


def call(tools, tool, **args):
    res = tools.call(tool, args, AGENT)
    assert not res.is_error, res.text
    assert len(res.text.encode()) < 8 * 1024, res.text
    return res


def ended_at_input(res):
    """The call's wait ended because the task waits for input (not at the window, not at its end)."""
    assert res.data["status"] == "running", res.text
    assert res.data["wait"]["waited"] < WINDOW, res.text
    return res.data["waiting_for_input"]


def test_a_python_repl_answers_a_for_loop_sent_at_once_at_its_prompt(tools):
    started = call(tools, "run", cmd="python3 -i -q", stdin="tty", name="py", wait_seconds=WINDOW)
    assert ended_at_input(started) == ">>> "
    assert 'waiting for input: ">>> "; send(id="py", text="...") types the answer' in started.text, started.text
    res = call(tools, "send", id="py", text="for i in range(3):\n    print(i * 7)\n", wait_seconds=WINDOW)
    assert ended_at_input(res) == ">>> ", res.text
    assert "\n0\n7\n14\n>>> " in res.text, res.text  # the whole loop ran: the prompt between lines ended nothing
    slow = call(tools, "send", id="py", text="import time; time.sleep(0.2); print('late')", wait_seconds=WINDOW)
    assert ended_at_input(slow) == ">>> " and "late\n" in slow.text, slow.text
    status = call(tools, "status", id="py")
    assert status.data["waiting_for_input"] == ">>> " and 'waiting for input: ">>> "' in status.text
    end = call(tools, "send", id="py", text="exit()", wait_seconds=WINDOW)
    assert end.data["status"] == "done" and "waiting_for_input" not in end.data, end.text


def test_read_p_on_a_tty_and_read_on_a_pipe(tools):
    tty = call(tools, "run", cmd='read -p "Continue [y/N]? " a; echo "got $a"', stdin="tty", name="rt",
               wait_seconds=WINDOW)
    assert ended_at_input(tty) == "Continue [y/N]? "
    assert 'waiting for input: "Continue [y/N]? "' in tty.text
    done = call(tools, "send", id="rt", text="y", wait_seconds=WINDOW)
    assert done.data["status"] == "done" and "got y" in done.text, done.text
    pipe = call(tools, "run", cmd='read a; echo "got $a"; read b; echo "and $b"', stdin="pipe", name="rp",
                wait_seconds=WINDOW)
    assert ended_at_input(pipe) == "" and "waiting for input (no prompt on its last line)" in pipe.text
    again = call(tools, "send", id="rp", text="one", wait_seconds=WINDOW)
    assert ended_at_input(again) == "" and "got one\n" in again.text, again.text
    last = call(tools, "send", id="rp", text="two", wait_seconds=WINDOW)
    assert last.data["status"] == "done" and "and two" in last.text, last.text


def test_getpass_and_an_apt_style_question(tools, tmp_path):
    gp = call(tools, "run", cmd="python3 -c 'import getpass; print(\"got\", getpass.getpass())'", stdin="tty",
              name="gp", wait_seconds=WINDOW)
    assert ended_at_input(gp) == "Password: "
    res = call(tools, "send", id="gp", text="hunter2", wait_seconds=WINDOW)
    assert res.data["status"] == "done" and "got hunter2" in res.text, res.text
    script = tmp_path / "install.sh"
    script.write_text('echo "The following NEW packages will be installed:"\necho "  cowsay"\n'
                      'read -p "Do you want to continue? [Y/n] " a\necho "answer=$a"\n')
    apt = call(tools, "run", cmd=f"bash {script}", stdin="tty", name="apt", wait_seconds=WINDOW)
    assert ended_at_input(apt) == "Do you want to continue? [Y/n] ", apt.text
    assert "cowsay" in apt.text
    yes = call(tools, "send", id="apt", text="Y", wait_seconds=WINDOW)
    assert yes.data["status"] == "done" and "answer=Y" in yes.text, yes.text


def test_a_reader_without_a_prompt_waits_and_a_busy_prompt_does_not(tools, tmp_path):
    quiet = call(tools, "run", cmd=f"{sys.executable} -c 'import sys; print(len(sys.stdin.readline()))'",
                 stdin="pipe", name="quiet", wait_seconds=WINDOW)
    assert ended_at_input(quiet) == ""
    gate = Gate(tmp_path)
    busy_code = f"import os; print('>>> ', end='', flush=True)\nwhile not os.path.exists({str(gate.path)!r}): pass"
    busy = call(tools, "run", cmd=f"{sys.executable} -c \"{busy_code}\"", stdin="tty", name="busy",
                wait_for=">>> $", wait_seconds=WINDOW)
    assert busy.data["wait_for"]["matched"] is not None, busy.text
    looked = call(tools, "status", id="busy", wait_seconds=0.3)
    assert looked.data["status"] == "running" and "waiting_for_input" not in looked.data, looked.text
    assert "waiting for input" not in looked.text and looked.data["wait"]["waited"] >= 0.3
    gate.open()
    assert call(tools, "status", id="busy", wait_seconds=WINDOW).data["status"] == "done"
    call(tools, "kill", id="quiet", force=True)


def test_a_client_waiting_for_its_peer_as_well_as_its_input_is_not_waiting_for_input(tools):
    code = ("import select, socket; a, b = socket.socketpair(); print('remote> ', end='', flush=True); "
            "select.select([0, a], [], [])")
    res = call(tools, "run", cmd=f'{sys.executable} -c "{code}"', stdin="tty", name="peer", wait_for="remote> $",
               wait_seconds=WINDOW)
    assert res.data["wait_for"]["matched"] is not None, res.text
    looked = call(tools, "status", id="peer", wait_seconds=0.3)
    assert "waiting_for_input" not in looked.data and looked.data["wait"]["waited"] >= 0.3, looked.text
    call(tools, "kill", id="peer", force=True)


def test_a_prompt_beside_a_sleeping_background_job_counts_once_the_output_is_still(tools):
    """The `sleep` is awake as far as the kernel says (a timer), so the wait counts only after the settle."""
    res = call(tools, "run", cmd='sleep 300 & read -p "name? " n; echo "hi $n"; kill %1', stdin="tty", name="bg",
               wait_seconds=WINDOW)
    assert ended_at_input(res) == "name? ", res.text
    done = call(tools, "send", id="bg", text="ann", wait_seconds=WINDOW)
    assert "hi ann" in done.text, done.text


@pytest.mark.parametrize("stdin", ["tty", "pipe"])
def test_a_status_wait_for_matches_a_prompt_printed_before_the_call(engine, tools, tmp_path, stdin):
    """The task printed its prompt and reads before the call: the prompt, never shown, is the match, though the
    input watch sees the read at the wait's first look; once shown it matches no second wait."""
    gate = Gate(tmp_path)  # the run's answer comes before the prompt, so it shows none of it
    call(tools, "run", cmd=f'{gate.wait}; printf "ready> "; read a; echo "got $a"', stdin=stdin, name="early",
         wait_seconds=0)
    gate.open()
    out = engine.store.path("early", "out")
    wait_until(lambda: out.read_bytes().endswith(b"ready> "), WINDOW, "the prompt in the output file")
    ready = call(tools, "status", id="early", wait_for="ready> $", wait_seconds=WINDOW)
    assert ready.data["status"] == "running" and ready.data["wait_for"]["matched"]["text"] == "ready> ", ready.text
    assert "wait_for matched" in ready.text, ready.text
    again = call(tools, "status", id="early", wait_for="ready> $", wait_seconds=0.3)
    assert again.data["wait_for"]["matched"] is None and again.data["wait"]["waited"] >= 0.3, again.text
    done = call(tools, "send", id="early", text="y", wait_seconds=WINDOW)
    assert done.data["status"] == "done" and "got y" in done.text, done.text


def test_list_marks_the_tasks_that_wait_for_input(tools):
    call(tools, "run", cmd='read -p "Continue [y/N]? " a', stdin="tty", name="ask", wait_seconds=WINDOW)
    call(tools, "run", cmd="sleep 300", stdin="pipe", name="deaf", wait_seconds=0)
    listing = call(tools, "list")
    rows = {r["id"]: r for r in listing.data["tasks"]}
    assert rows["ask"]["waiting_for_input"] == "Continue [y/N]? " and rows["deaf"]["waiting_for_input"] is None
    assert 'ask?: waiting for input: "Continue [y/N]? "' in listing.text, listing.text
    assert any(line.startswith("ask ") and "running?" in line for line in listing.text.splitlines())
    for task_id in ("ask", "deaf"):
        call(tools, "kill", id=task_id, force=True)


def test_where_proc_cannot_tell_nothing_is_said(tools, monkeypatch):
    """An architecture whose call numbers the reading does not know stands for any /proc that cannot tell."""
    monkeypatch.setattr(blocked_read.platform, "machine", lambda: "sparc64")
    res = call(tools, "run", cmd='read -p "Continue [y/N]? " a', stdin="tty", name="blind", wait_seconds=0.3)
    assert "waiting_for_input" not in res.data and "waiting for input" not in res.text, res.text
    call(tools, "kill", id="blind", force=True)


def test_a_task_that_asks_while_no_call_waits_updates_its_todo_once(engine, todos, tools, tmp_path):
    gate = Gate(tmp_path)
    call(tools, "run", cmd=f'{gate.wait}; read -p "Proceed? [y/N] " a; echo "got $a"', stdin="tty", name="later",
         wait_seconds=0)
    todos.wait_upserts("later", 1)  # its "running" todo
    gate.open()  # it asks once no call waits on it
    watch = engine.rooms.answers.inputs
    for _ in range(3):  # the watch's passes (its thread makes them too): one todo for the one wait
        watch.look_unwatched()
    asking = [u for u in todos.wait_upserts("later", 2) if "waits for input" in u["summary"]]
    assert len(asking) == 1, todos.for_key("later")
    assert asking[0]["summary"] == 'bash later waits for input: "Proceed? [y/N] "'
    assert 'send(id="later", text="...")' in asking[0]["body"]
    assert asking[0]["data"]["waiting_for_input"] == "Proceed? [y/N] "
    done = call(tools, "send", id="later", text="y", wait_seconds=WINDOW)
    assert done.data["status"] == "done" and "got y" in done.text
    calls = todos.for_key("later")
    assert calls[-1] == ("clear", "later"), calls  # the answer delivered the end
    assert "running" in calls[-2][2], calls  # answered: the todo was the running one again first


def test_the_settle_is_tens_of_milliseconds():
    assert 0.01 <= input_watch.SETTLE_SECONDS <= 0.1


def test_a_background_question_reaches_the_reference_sink_once(tmp_path):
    with running_sink() as sink:
        daemon = start_daemon(bash_daemon_argv(tmp_path / "state", "--agent-socket", str(sink.socket_path)),
                              tmp_path)
        agent = SdkAgent(daemon.url)
        try:
            gate = Gate(tmp_path)
            agent.call("run", cmd=f'{gate.wait}; read -p "Overwrite config? [y/N] " a; echo "got $a"',
                       stdin="tty", name="cfg", wait_seconds=0)
            gate.open()  # it asks once no call waits on it
            asked = sink.wait_event(lambda e: e["event"] == "upsert" and e["key"] == "cfg"
                                    and "waits for input" in e["summary"], "the todo that says cfg asks")
            assert asked["summary"] == 'bash cfg waits for input: "Overwrite config? [y/N] "', asked
            # Two more tasks that ask, one after the other: their todos come from later passes of the watch,
            # each of which looked at cfg again, still waiting.
            for other in ("two", "three"):
                later = Gate(tmp_path)
                agent.call("run", cmd=f'{later.wait}; read -p "More? " a', stdin="tty", name=other, wait_seconds=0)
                later.open()
                sink.wait_event(lambda e, o=other: e["event"] == "upsert" and e["key"] == o
                                and "waits for input" in e["summary"], f"the todo that says {other} asks")
            text = agent.call("send", id="cfg", text="n", wait_seconds=WINDOW)
            assert "got n" in text, text
            changes = sink.changes(key="cfg")
            assert [c for c in changes if c[0] == "upsert" and "waits for input" in c[2]] == [
                ("upsert", "cfg", asked["summary"])], changes
        finally:
            agent.close()
            daemon.stop()


class Reports:
    """A progress reporter that records what a wait reports."""

    wanted = True

    def __init__(self):
        self.messages = []
        self.cond = threading.Condition()

    def report(self, progress, total, message):
        with self.cond:
            self.messages.append(message)
            self.cond.notify_all()

    def wait(self, count):
        with self.cond:
            assert wait_for(self.cond, lambda: len(self.messages) >= count, WINDOW), self.messages


@pytest.mark.slow
def test_a_long_wait_that_ends_at_a_question_says_so_in_its_last_progress(tools, tmp_path):
    gate = Gate(tmp_path)
    call(tools, "run", cmd=f'{gate.wait}; read -p "Go on? " a', stdin="tty", name="slowq", wait_seconds=0)
    reports = Reports()
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(tools.call, "status", {"id": "slowq", "wait_seconds": WINDOW},
                             CallContext(structured=True, progress=reports))
        reports.wait(1)  # a second into the wait: then it asks
        gate.open()
        res = answer.result(WINDOW + 10)
    assert res.data["waiting_for_input"] == "Go on? ", res.text
    assert reports.messages[-1] == 'waiting for input: "Go on? "', reports.messages
    call(tools, "kill", id="slowq", force=True)
