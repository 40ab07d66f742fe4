"""The engine with real processes: every state and transition, waits, kills, timeouts, the queue, todos,
retention, restart and bad input. Timing bounds here are correctness bounds (a wait that did not wake, a
timeout that did not fire), set generously for a loaded 2-core box, never speed claims."""

import json
import os
import threading

import pytest
from kit.gate import Gate
from kit.hivebash_testkit import (
    ended_in_memory,
    ended_mid_wait,
    marked_processes,
    shell_exited,
    task_ids,
    wait_idle,
    wait_until,
)

from hivebash.answers.texts import facts_line
from hivebash.engine import EngineError, UnknownTask
from hivebash.processes import runner


def test_run_inline_result_has_exit_code_tails_rusage_and_no_todo(engine, todos):
    out = engine.run("echo hi; echo oops >&2; exit 3", wait_seconds=10)
    data = out.view.to_dict()
    assert data["status"] == "done" and data["exit_code"] == 3 and data["signal"] is None
    assert data["stdout"]["tail"] == "hi\n" and data["stderr"]["tail"] == "oops\n"
    assert "max_rss_bytes" in data["rusage"] and data["duration"] >= 0
    assert todos.for_key(data["id"]) == []  # the result was delivered inline


def test_a_caller_that_hung_up_during_the_wait_gets_its_result_as_a_todo(engine, todos):
    """Nobody reads an inline answer whose client is gone: the completion must come as a todo instead."""
    outcome = engine.run("echo gone", wait_seconds=20, name="gone", client_gone=lambda: True)
    assert outcome.view.task.state == "done"
    calls = todos.for_key("gone")
    assert [c[0] for c in calls] == ["upsert"] and "status=done exit_code=0" in calls[0][2]
    engine.status("gone", client_gone=lambda: True)
    assert [c[0] for c in todos.for_key("gone")] == ["upsert", "upsert"], "still not seen: the todo stays"
    engine.status("gone")
    assert todos.for_key("gone")[-1][0] == "clear", "a status that is read clears it"


def test_a_background_task_that_ends_at_once_gets_only_its_completion_todo(engine, todos):
    """The "running" todo waits until the task has run for RUNNING_RECORD_DELAY: a task that ends sooner
    would have it replaced a moment later (two harness requests for one notice)."""
    tid = engine.run("true", wait_seconds=0).view.task.id
    assert wait_idle(engine, 10)
    calls = todos.for_key(tid)
    assert [c[0] for c in calls] == ["upsert"] and "status=done exit_code=0" in calls[0][2]


def test_background_task_gets_running_todo_then_completion_then_status_clears_it(engine, todos, tmp_path):
    gate = Gate(tmp_path)  # held until its running todo is out
    out = engine.run(f"{gate.wait}; echo done", wait_seconds=0)
    tid = out.view.task.id
    assert out.view.task.state in ("pending", "running")
    todos.wait_upserts(tid)
    gate.open()
    assert wait_idle(engine, 10)
    calls = todos.for_key(tid)
    assert [c[0] for c in calls] == ["upsert", "upsert"]
    assert "running" in calls[0][2] or "queued" in calls[0][2]
    assert "status=done exit_code=0" in calls[1][2] and f"Read({engine.state_dir}/bash-tasks/{tid}.out)" in calls[1][3]
    st = engine.status(tid)
    assert st.view.task.state == "done" and st.view.stdout.text == "done\n"
    assert todos.for_key(tid)[-1] == ("clear", tid)
    engine.status(tid)  # a second observation does not clear twice
    assert len(todos.for_key(tid)) == 3


def test_wait_wakes_as_soon_as_the_task_ends(engine, todos, tmp_path):
    gate = Gate(tmp_path)  # held until its running todo is out and the status call waits
    out = engine.run(gate.wait, wait_seconds=0)
    todos.wait_upserts(out.view.task.id)
    st = ended_mid_wait(engine, out.view.task.id, gate, lambda: engine.status(out.view.task.id, wait_seconds=20))
    assert st.view.task.state == "done"
    assert st.waited < 10  # woke on the exit, not at the 20 s deadline
    assert todos.for_key(out.view.task.id)[-1][0] == "clear"


def test_wait_is_capped_and_says_so(make_engine, todos):
    engine = make_engine(wait_cap=0.3)
    out = engine.run("sleep 30", wait_seconds=3)
    assert out.window.capped and out.window.seconds == 0.3 and out.window.asked == 3
    assert out.view.task.state == "running" and out.waited >= 0.29
    assert todos.for_key(out.view.task.id)[0][0] == "upsert"  # not finished in the window: running todo
    engine.kill(out.view.task.id, force=True)


def test_name_reuse_refused_while_running_allowed_after(engine):
    first = engine.run("echo first; sleep 30", name="build", wait_seconds=0.5)
    before = sorted(os.listdir(engine.store.dir))
    with pytest.raises(EngineError, match="name: task 'build' is still running"):
        engine.run("echo second", name="build")
    assert sorted(os.listdir(engine.store.dir)) == before
    engine.kill("build", force=True)
    assert engine.status("build", wait_seconds=10).view.task.state == "killed"
    again = engine.run("echo second", name="build", wait_seconds=10)
    assert again.view.task.state == "done" and again.view.stdout.text == "second\n"
    assert again.view.task.marker != first.view.task.marker
    assert json.loads((engine.store.dir / "build.json").read_text())["state"] == "done"


def test_pending_queue_runs_in_submission_order_and_kill_cancels_pending(make_engine, tmp_path):
    engine = make_engine(max_running=1)
    gate = Gate(tmp_path)  # `a` holds the only slot until b was seen queued and cancelled
    a = engine.run(f"{gate.wait}; echo a", wait_seconds=0).view.task.id
    b = engine.run("echo b", wait_seconds=0).view.task.id
    c = engine.run("echo c", wait_seconds=0).view.task.id
    st_b = engine.status(b)
    assert st_b.view.task.state == "pending" and st_b.view.queue_position == 1
    killed = engine.kill(b)
    assert killed.action == "cancelled" and killed.view.task.state == "killed" and killed.view.task.pid is None
    gate.open()
    assert engine.status(c, wait_seconds=10).view.task.state == "done"
    sa, sc = engine.status(a).view, engine.status(c).view
    assert sa.task.result.ended_at <= sc.task.started_at  # c waited for a's slot
    assert engine.status(b).view.stdout.text == ""  # never ran


def test_kill_stops_a_tree_with_background_children_and_a_setsid_grandchild(engine):
    cmd = "sleep 300 & bash -c 'sleep 301 & wait' & setsid sleep 302 & echo started; wait"
    out = engine.run(cmd, wait_seconds=0)
    tid, marker = out.view.task.id, out.view.task.marker
    assert wait_until(lambda: len(marked_processes(marker)) >= 5)
    k = engine.kill(tid)  # graceful: SIGINT, which the & children ignore (non-interactive bash)
    assert k.action == "signalled"
    st = engine.status(tid, wait_seconds=10).view
    assert st.task.state == "killed" and st.task.result.note == "killed by request (SIGINT)"
    assert wait_until(lambda: marked_processes(marker) == [], timeout=5)


@pytest.mark.slow
def test_force_kill_and_signal_death_is_named(engine):
    out = engine.run("kill -SEGV $$", wait_seconds=10).view
    assert (out.task.state, out.task.result.exit_code, out.task.result.signal) == ("done", 139, "SIGSEGV")
    tid = engine.run("trap '' INT; echo trapped; sleep 300", wait_seconds=0).view.task.id
    # Not just "running": the shell must have set its trap, or the SIGINT kills it (a race the test lost once
    # the spawn got faster).
    assert wait_until(lambda: engine.status(tid).view.stdout.text == "trapped\n")
    engine.kill(tid)  # ignored by the trap
    assert engine.status(tid, wait_seconds=0.5).view.task.state == "running"
    engine.kill(tid, force=True)
    st = engine.status(tid, wait_seconds=10).view
    assert (st.task.state, st.task.result.signal) == ("killed", "SIGKILL")


@pytest.mark.slow
def test_capped_polls_keep_a_task_running_until_its_deadline(engine, monkeypatch):
    """The worker's poll is capped (runner.MAX_POLL_MS, an hour, since poll() takes an int of ms); with the cap
    made ~50 ms, a task with a 2 s timeout goes through dozens of capped polls that end with nothing to do:
    each must loop on, not end the task (early) or give up its deadline (late)."""
    monkeypatch.setattr(runner, "MAX_POLL_MS", 50)
    tid = engine.run("sleep 30", timeout_secs=2, wait_seconds=0).view.task.id
    early = engine.status(tid, wait_seconds=1.2).view  # ~24 capped polls in the worker meanwhile
    assert early.task.state == "running", early.task
    ended = engine.status(tid, wait_seconds=20).view
    assert ended.task.state == "timed_out" and ended.task.result.signal == "SIGTERM", ended.task
    assert 2.0 <= ended.task.result.duration < 5, "ended at its deadline, not at a capped poll nor much later"


@pytest.mark.slow
def test_timeout_terms_then_kills_after_grace(make_engine):
    engine = make_engine(kill_grace=0.5)
    view = engine.run("trap '' TERM; echo x; sleep 30", timeout_secs=0.5, wait_seconds=20).view
    assert view.task.state == "timed_out" and view.task.result.signal == "SIGKILL"
    assert view.task.result.note == "timed out after 0.5s"
    # correctness bound: ended by SIGKILL at deadline + grace (1.0 s), not by the 30 s sleep
    assert 0.9 <= view.task.result.duration < 5
    polite = engine.run("sleep 30", timeout_secs=0.3, wait_seconds=20).view
    assert polite.task.state == "timed_out" and polite.task.result.signal == "SIGTERM"
    assert marked_processes(view.task.marker) == []


def test_leftovers_of_a_finished_task_are_reported_and_kill_stops_them(engine):
    view = engine.run("sleep 300 & echo bg", wait_seconds=10).view
    assert view.task.state == "done"
    assert wait_until(lambda: len(engine.status(view.task.id).view.leftovers) == 1)  # found just after the end
    k = engine.kill(view.task.id)
    assert k.action == "leftovers" and k.view.task.state == "done"
    assert wait_until(lambda: engine.status(view.task.id).view.leftovers == [])


@pytest.mark.slow
def test_huge_and_binary_output_tails(engine):
    cmd = 'truncate -s 5G "$(readlink /proc/$$/fd/1)"; printf "\\xc3\\xa9end\\n"; printf "\\xff\\x00bin" >&2'
    view = engine.run(cmd, wait_seconds=10).view
    out, err = view.stdout, view.stderr
    assert out.size == 5 * 1024**3 + 6 and out.text.endswith("éend\n") and out.elided == out.size - out.shown
    assert out.shown <= 4096
    assert err.text == "\\xff\\x00bin"
    data = view.to_dict()
    json.dumps(data)
    assert data["stdout"]["elided_bytes"] > 0


def test_concurrent_runs_get_distinct_ids_and_their_own_output(make_engine):
    engine = make_engine(threads=32, max_inline_waits=16)
    results = {}

    def one(i):
        results[i] = engine.run(f"echo task-{i}", wait_seconds=20)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.view.task.id for r in results.values()}) == 12
    for i, r in results.items():
        assert r.view.task.state == "done" and r.view.stdout.text == f"task-{i}\n"


def test_many_waiters_do_not_block_a_prompt_kill(engine):
    tid = engine.run("sleep 300", wait_seconds=0).view.task.id
    outcomes = []

    def waiter():
        outcomes.append(engine.status(tid, wait_seconds=25))

    threads = [threading.Thread(target=waiter) for _ in range(10)]
    for t in threads:
        t.start()
    assert wait_until(lambda: sum(o.wait_skipped for o in outcomes) == 6)  # max_inline_waits=4: answered at once
    assert not engine.slots.try_acquire(), "the four others hold every slot while they wait"
    engine.kill(tid)
    for t in threads:
        t.join(15)
    assert len(outcomes) == 10
    woken = [o for o in outcomes if not o.wait_skipped]
    assert all(o.view.task.state == "killed" and o.waited < 15 for o in woken)


def test_list_newest_first_with_filter_and_limit(engine):
    ids = [engine.run(f"exit {i}", wait_seconds=10).view.task.id for i in range(3)]
    running = engine.run("sleep 300", wait_seconds=0).view.task.id
    views, total = engine.list()
    assert [v.task.id for v in views] == [running] + ids[::-1] and total == 4
    views, total = engine.list(state="done", limit=2)
    assert [v.task.id for v in views] == ids[::-1][:2] and total == 3
    with pytest.raises(EngineError, match="state: must be one of"):
        engine.list(state="finished")
    engine.kill(running, force=True)


def test_retention_prunes_oldest_finished_tasks_with_their_files(make_engine):
    engine = make_engine(keep_tasks=2)
    ids = [engine.run(f"echo {i}", wait_seconds=10).view.task.id for i in range(4)]
    assert wait_until(lambda: sorted(task_ids(engine)) == sorted(ids[2:]))
    gone = lambda: not any(n.split(".")[0] in ids[:2] for n in os.listdir(engine.store.dir))  # noqa: E731
    assert wait_until(gone)
    names = os.listdir(engine.store.dir)
    assert {f"{ids[3]}.out", f"{ids[3]}.json"} <= set(names)


def test_shutdown_interrupts_running_and_pending_and_leaves_no_process(make_engine, todos):
    engine = make_engine(max_running=1)
    run = engine.run("sleep 300 & setsid sleep 301 & wait", wait_seconds=0.3).view.task
    pend = engine.run("echo never", wait_seconds=0).view.task
    assert wait_until(lambda: len(marked_processes(run.marker)) >= 3)
    engine.shutdown()
    assert engine.status(run.id).view.task.state == "interrupted"
    assert engine.status(pend.id).view.task.state == "interrupted"
    assert wait_until(lambda: marked_processes(run.marker) == [], timeout=5)
    assert json.loads((engine.store.dir / f"{run.id}.json").read_text())["state"] == "interrupted"


BAD_RUNS = [
    (dict(cmd="true", name="Bad_Name"), "name:"),
    (dict(cmd="true", name="x" * 64), "name:"),
    (dict(cmd="true", name=".."), "name:"),
    (dict(cmd="true", name=""), "name:"),
    (dict(cmd="true", timeout_secs=-1), "timeout_secs:"),
    (dict(cmd="true", timeout_secs=0), "timeout_secs:"),
    (dict(cmd="true", timeout_secs="10"), "timeout_secs:"),
    (dict(cmd="true", timeout_secs=True), "timeout_secs:"),
    (dict(cmd="true", wait_seconds=-1), "wait_seconds:"),
    (dict(cmd="x" * (64 * 1024 + 1)), "cmd:"),
    (dict(cmd=""), "cmd:"),
    (dict(cmd=None), "cmd:"),
    (dict(cmd="true", cwd="/definitely/not/here"), "cwd:"),
]


@pytest.mark.parametrize("kwargs,field", BAD_RUNS, ids=[f"{i}-{b[1]}" for i, b in enumerate(BAD_RUNS)])
def test_bad_run_input_is_refused_and_changes_nothing(engine, todos, kwargs, field):
    before = (sorted(os.listdir(engine.store.dir)), task_ids(engine))
    with pytest.raises(EngineError) as exc:
        engine.run(**kwargs)
    assert str(exc.value).startswith(field)
    assert (sorted(os.listdir(engine.store.dir)), task_ids(engine)) == before and todos.calls == []


@pytest.mark.parametrize("bad", ["nope", "..", "x" * 64, "A", 5])
def test_unknown_or_bad_ids_are_refused(engine, bad):
    for call in (lambda: engine.status(bad), lambda: engine.kill(bad)):
        with pytest.raises(EngineError, match="^id: "):
            call()
    with pytest.raises(UnknownTask):
        engine.status("nope")


def test_cwd_is_used(engine, tmp_path):
    view = engine.run("pwd", cwd=str(tmp_path), wait_seconds=10).view
    assert view.stdout.text == f"{tmp_path}\n" and view.task.cwd == str(tmp_path)


def test_peak_rss_is_shown_only_above_the_daemons_own_peak(engine):
    big = engine.run("python3 -c 'b = b\"x\" * (400 << 20)'", wait_seconds=30).view
    assert big.task.result.rusage.max_rss_exact and big.to_dict()["rusage"]["max_rss_bytes"] >= 400 << 20
    assert "max_rss=4" in facts_line(big)
    for _ in range(5):  # inherits the daemon's memory at the fork, below its peak read after it: never exact
        small = engine.run("true", wait_seconds=30).view
        assert not small.task.result.rusage.max_rss_exact and small.to_dict()["rusage"]["max_rss_bytes"] is None
    assert "max_rss" not in facts_line(small) and "cpu=" in facts_line(small)


def test_a_peak_below_an_earlier_reading_of_the_daemons_needs_no_getrusage(monkeypatch):
    import resource

    import hivebash.processes.runner as runner

    real, calls = resource.getrusage, []
    monkeypatch.setattr(runner.resource, "getrusage", lambda who: calls.append(who) or real(who))
    monkeypatch.setattr(runner, "_daemon_peak_seen", 0)
    ours = real(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert runner._above_daemon_peak(ours + (1 << 30))  # above anything seen: read, and above it
    assert not runner._above_daemon_peak(ours // 2)  # not above the reading: no syscall needed
    assert not runner._above_daemon_peak(ours)
    assert len(calls) == 1


@pytest.mark.slow
def test_force_kill_during_the_grace_escalates_at_once(make_engine):
    engine = make_engine(kill_grace=20)
    tid = engine.run("bash -c \"trap '' TERM INT; echo trapped; sleep 300\" & wait", wait_seconds=0).view.task.id
    marker = engine.status(tid).view.task.marker
    assert wait_until(lambda: engine.status(tid).view.stdout.text == "trapped\n")  # the inner shell's trap is set
    engine.kill(tid)  # the shell dies of SIGINT; what it left ignores SIGINT and SIGTERM: the 20 s grace starts
    assert wait_until(lambda: shell_exited(engine, tid) or engine.status(tid).view.task.terminal)
    assert engine.status(tid).view.task.state == "running"
    engine.kill(tid, force=True)
    view = engine.status(tid, wait_seconds=10).view
    assert view.task.state == "killed" and view.duration < 15  # did not sit out the 20 s grace
    assert wait_until(lambda: marked_processes(marker) == [], timeout=5)


def test_a_status_without_a_wait_answers_an_end_once_its_record_is_written(engine):
    """A status must not say `done` while the record on disk still says `pending`: a daemon killed right after
    would read `interrupted` at its next start, contradicting the answer."""
    written = threading.Event()
    save = engine.store.save_dict

    def held_terminal_write(task_id, record, made=None):
        if record["state"] == "done":
            assert written.wait(10), "the test never released the terminal record"
        save(task_id, record, made)

    engine.store.save_dict = held_terminal_write
    tid = engine.run("true", wait_seconds=0).view.task.id
    assert wait_until(lambda: ended_in_memory(engine, tid))  # ended in memory, record held back
    answers = []
    asking = threading.Thread(target=lambda: answers.append(engine.status(tid)))
    asking.start()
    asking.join(0.3)
    assert answers == [], "answered before the record was written"
    written.set()
    asking.join(10)
    assert answers[0].view.task.state == "done"
    assert json.loads(engine.store.path(tid, "json").read_text())["state"] == "done"
