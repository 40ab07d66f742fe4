"""The engine against a fake claude (fake_claude.py): real processes, signals and files, seconds not minutes.

The real CLI covers the same verbs in test_interop_claude.py; here are the cases claude cannot be made to
produce on cue: SIGINT ignored (escalation to SIGKILL), a tool process in a session of its own, a crash or
a failure status without a result, the turn timeout, max_running, shutdown.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import psutil
import pytest
from daemon_harness import wait_until
from kit.gate import Gate
from kit.subagent_testkit import running_names, wait_for_turns

from hivesubagent.engine import SubagentError, open_prompt_file
from hivesubagent.transcripts.sessions import SessionStore
from hivesubagent.turns import turn as T


def wait_running_in_fake(engine, name: str, seconds: float = 10.0) -> None:
    """Until the fake wrote its init line (it then installs its SIGINT handler right after)."""
    ok = wait_for_turns(engine, lambda: (engine.running_view(name) or {}).get("confirmed"), seconds)
    assert ok, f"{name} did not report init within {seconds}s"


def fake_log(tmp_path: Path) -> list[dict]:
    path = tmp_path / "fake-claude.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_start_runs_in_background_and_sends_one_todo(engine_factory, fake_claude_bin, fake_env, prompt_file, tmp_path):
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    gate = Gate(tmp_path)  # the turn ends after start's answer
    trigger = f"FAKE:gate={gate.path} FAKE:reply=done here"
    view = engine.start("alpha", str(prompt_file), trigger=trigger)
    assert view["state"] in ("running", "starting") and view["running"] is True
    assert view["session_id"] and view["pid"]
    gate.open()
    todo = todos.wait_upserts("alpha")[0]
    assert todo["summary"].startswith("subagent alpha: turn 1 completed")
    assert todo["body"].splitlines()[0].startswith("outcome=completed name=alpha")
    assert "done here" in todo["body"] and 'continue(name="alpha"' in todo["body"]
    assert todo["data"]["outcome"]["cost_usd"] == pytest.approx(0.01)
    # clear first (the previous turn's todo is stale once a new turn starts), then exactly one upsert
    assert [c[0] for c in todos.for_key("alpha")] == ["clear", "upsert"]
    call = fake_log(tmp_path)[0]
    assert call["prompt"] == trigger
    argv = call["argv"]
    assert argv[:2] == ["-p", "--name"] and "--dangerously-skip-permissions" in argv and "--strict-mcp-config" in argv
    assert argv[argv.index("--session-id") + 1] == view["session_id"]
    assert argv[argv.index("--append-system-prompt-file") + 1].startswith("/dev/fd/")


def test_default_trigger_and_model_flag(engine_factory, fake_claude_bin, fake_env, prompt_file, tmp_path):
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    engine.start("beta", str(prompt_file), model="claude-haiku-4-5")
    todos.wait_upserts("beta")
    call = fake_log(tmp_path)[0]
    assert call["prompt"] == "Carry out your instructions."
    assert call["argv"][call["argv"].index("--model") + 1] == "claude-haiku-4-5"


def test_the_budget_reaches_claude_on_start_and_continue(engine_factory, fake_claude_bin, fake_env, prompt_file,
                                                         tmp_path):
    """max_budget_usd goes to claude as --max-budget-usd on start and on continue; the daemon's default when the
    call gives none, and no flag when neither does (claude then has no budget of its own)."""
    engine, todos = engine_factory(fake_claude_bin, fake_env, max_budget_usd=0.75)
    engine.start("delta", str(prompt_file), max_budget_usd=1.5)
    todos.wait_upserts("delta")
    engine.continue_("delta", "again")
    todos.wait_upserts("delta", 2)
    engine.start("epsilon", str(prompt_file))
    todos.wait_upserts("epsilon")
    calls = fake_log(tmp_path)
    budgets = [c["argv"][c["argv"].index("--max-budget-usd") + 1] if "--max-budget-usd" in c["argv"] else None
               for c in calls]
    assert [float(b) for b in budgets] == [1.5, 0.75, 0.75], budgets
    bare, bare_todos = engine_factory(fake_claude_bin, fake_env)
    bare.start("zeta", str(prompt_file))
    bare_todos.wait_upserts("zeta")
    assert "--max-budget-usd" not in fake_log(tmp_path)[-1]["argv"]


def test_continue_resumes_by_id_and_counts_cost(engine_factory, fake_claude_bin, fake_env, prompt_file, tmp_path):
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    first = engine.start("gamma", str(prompt_file), trigger="one")
    todos.wait_upserts("gamma")
    gate = Gate(tmp_path)  # the second turn ends after continue's answer
    running = engine.continue_("gamma", f"two FAKE:gate={gate.path} FAKE:reply=second answer")
    assert running["turns_done"] == 1 and running["total_cost_usd"] == pytest.approx(0.01)
    assert running["model"] == "fake-model"  # no --model: the session keeps its last one, known from the transcript
    gate.open()
    todo = todos.wait_upserts("gamma", 2)[1]
    assert todo["data"]["turn"] == 2 and todo["data"]["session_id"] == first["session_id"]
    assert todo["data"]["outcome"]["cost_usd"] == pytest.approx(0.01)
    assert todo["data"]["outcome"]["total_cost_usd"] == pytest.approx(0.02)
    argv = fake_log(tmp_path)[1]["argv"]
    assert argv[argv.index("--resume") + 1] == first["session_id"] and "--name" not in argv
    status = engine.status("gamma")
    assert status["running"] is False and status["turns"] == 2
    assert status["last_turn"]["outcome"] == "completed" and status["last_turn"]["result_text"] == "second answer"
    assert status["total_cost_usd"] == pytest.approx(0.02)


def test_refusals_while_running_and_max_running(engine_factory, fake_claude_bin, fake_env, prompt_file):
    engine, todos = engine_factory(fake_claude_bin, fake_env, max_running=2)
    engine.start("one", str(prompt_file), trigger="FAKE:sleep=30")
    with pytest.raises(SubagentError, match="refused: 'one' is running"):
        engine.start("one", str(prompt_file))
    with pytest.raises(SubagentError, match="refused: 'one' is running"):
        engine.continue_("one", "more")
    with pytest.raises(SubagentError,
                       match=r"^result_offset: 'one' is running turn 1; its result can be read once it ends"):
        engine.status("one", result_offset=0)
    with pytest.raises(SubagentError, match=r"^result_offset: needs name"):
        engine.status(None, result_offset=0)
    engine.start("two", str(prompt_file), trigger="FAKE:sleep=30")
    with pytest.raises(SubagentError, match="max_running=2"):
        engine.start("three", str(prompt_file))
    assert running_names(engine) == ["one", "two"]
    assert engine.status()["running"] == 2


def test_soft_interrupt_escalates_to_sigkill_when_sigint_is_ignored(engine_factory, fake_claude_bin,
                                                                    fake_env, prompt_file):
    engine, todos = engine_factory(fake_claude_bin, fake_env, kill_grace=0.5)
    engine.start("stubborn", str(prompt_file), trigger="FAKE:ignore-int FAKE:sleep=60")
    wait_running_in_fake(engine, "stubborn")
    view = engine.interrupt("stubborn")
    assert view["state"] == "ended"
    assert view["outcome"]["outcome"] == "killed"
    assert set(view["signals"]) == {"SIGINT", "SIGKILL"} and "after SIGINT" in view["signals"]["SIGKILL"]
    assert todos.wait_upserts("stubborn")[0]["data"]["outcome"]["outcome"] == "killed"


def test_soft_interrupt_records_interrupted(engine_factory, fake_claude_bin, fake_env, prompt_file):
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    engine.start("soft", str(prompt_file), trigger="FAKE:sleep=60")
    wait_running_in_fake(engine, "soft")
    view = engine.interrupt("soft")
    assert view["outcome"]["outcome"] == "interrupted" and view["outcome"]["exited_without_result"] is True
    assert list(view["signals"]) == ["SIGINT"]
    assert engine.status("soft")["last_turn"]["outcome"] == "interrupted"
    # a later turn stopped before claude recorded what it spent: its cost is unknown, not 0 (nor the earlier total)
    engine.continue_("soft", "FAKE:sleep=60 again")
    wait_running_in_fake(engine, "soft")
    second = engine.interrupt("soft")["outcome"]
    assert second["cost_usd"] is None and second["total_cost_usd"] is None
    assert engine.status("soft")["last_turn"]["cost_usd"] is None


@pytest.mark.slow
def test_forced_interrupt_kills_tool_processes_outside_the_group(engine_factory, fake_claude_bin, fake_env,
                                                                 prompt_file, tmp_path):
    """claude's Bash tool runs commands in a session of their own; killpg alone would orphan them."""
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    pidfile = tmp_path / "grandchild.pid"
    engine.start("tree", str(prompt_file), trigger=f"FAKE:grandchild={pidfile}\nFAKE:sleep=60")
    wait_running_in_fake(engine, "tree")
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 10.0, "the grandchild's pid file")
    grandchild = psutil.Process(int(pidfile.read_text()))
    assert os.getsid(grandchild.pid) == grandchild.pid  # really outside claude's group and session
    view = engine.interrupt("tree", force=True)
    assert view["outcome"]["outcome"] == "killed" and view["signals"] == {"SIGKILL": "interrupt(force=true)"}
    grandchild.wait(10)  # raises TimeoutExpired if it survived
    assert not grandchild.is_running()


def test_the_daemons_turn_timeout_is_the_default_time_limit(engine_factory, fake_claude_bin, fake_env, prompt_file):
    engine, todos = engine_factory(fake_claude_bin, fake_env, turn_timeout=1.2)
    view = engine.start("slow", str(prompt_file), trigger="FAKE:sleep=60")
    assert view["timeout_minutes"] == 0.02 and view["max_turns"] == 200  # the defaults in force, named
    todo = todos.wait_upserts("slow", seconds=30)[0]
    outcome = todo["data"]["outcome"]
    assert outcome["outcome"] == "timed_out" and outcome["timeout_minutes"] == 0.02
    assert outcome["detail"].startswith("reached its time limit (0.02 min): stopped by SIGINT (timeout_minutes=0.02)")
    assert "timeout_minutes=0.02" in todo["body"].splitlines()[0] and 'timeout_minutes=...) gives it' in todo["body"]
    # an interrupt is not a timeout, and no cap at all is 0 in the knob
    unbounded, todos2 = engine_factory(fake_claude_bin, fake_env, turn_timeout=0, max_turns=0)
    free = unbounded.start("free", str(prompt_file), trigger="FAKE:sleep=60")
    assert free["timeout_minutes"] is None and free["max_turns"] is None
    assert unbounded.interrupt("free")["outcome"]["outcome"] == "interrupted"


@pytest.mark.parametrize(
    "trigger, outcome, detail",
    [
        ("FAKE:exit=3", "error", "claude exited with status 3 without a result: fake claude: failing on request"),
        ("FAKE:noresult", "interrupted", "claude exited without a result"),
        ("FAKE:error", "error", "API error 500"),
    ],
)
def test_outcomes_without_a_clean_result(engine_factory, fake_claude_bin, fake_env, prompt_file, trigger,
                                         outcome, detail):
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    engine.start("odd", str(prompt_file), trigger=trigger)
    todo = todos.wait_upserts("odd")[0]
    data = todo["data"]["outcome"]
    assert data["outcome"] == outcome and data["detail"] == detail
    assert todo["body"].count("failing on request") == (1 if "exit" in trigger else 0)  # stderr once, in the detail


def test_continue_of_unknown_name_and_interrupt_of_idle_name(engine_factory, fake_claude_bin, fake_env, prompt_file):
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    with pytest.raises(SubagentError, match="no session named 'ghost'"):
        engine.continue_("ghost", "hello")
    with pytest.raises(SubagentError, match="'ghost' is not running"):
        engine.interrupt("ghost")
    with pytest.raises(SubagentError, match="no session named 'ghost'"):
        engine.status("ghost")
    assert running_names(engine) == []  # refusals release the reservation


def test_a_start_stopped_before_claude_wrote_a_transcript_says_what_became_of_it(engine_factory, fake_claude_bin,
                                                                                   fake_env, prompt_file):
    """A short time limit on a loaded machine can stop claude before it wrote anything (the real one, in a
    suite run beside another: the fake stays silent on cue). There is no session to show or continue, and the
    refusal says why, and what to do."""
    engine, todos = engine_factory(fake_claude_bin, fake_env, turn_timeout=0.6)
    engine.start("early", str(prompt_file), trigger="FAKE:starting=30")
    todo = todos.wait_upserts("early")[0]
    assert todo["data"]["outcome"]["outcome"] == "timed_out"
    assert todo["body"].endswith("\n\nnext: claude ended before it wrote a transcript, so there is no session "
                                 'to continue; start(name="early", ...) begins it again.'), todo["body"]
    said = (r"name: no session named 'early': its turn 1 ended \(timed_out: reached its time limit \(0\.01 min\).*\) "
            r"before claude wrote a transcript in .*, so there is nothing to show or continue; "
            r"start\(name='early', \.\.\.\) begins it again$")
    for call in (lambda: engine.status("early"), lambda: engine.continue_("early", "again")):
        with pytest.raises(SubagentError, match=said):
            call()
    assert running_names(engine) == []
    engine.start("early", str(prompt_file), trigger="FAKE:reply=here")  # begins it again, as the refusal says
    assert todos.wait_upserts("early", count=2)[-1]["data"]["outcome"]["outcome"] == "completed"
    assert engine.status("early")["last_turn"]["outcome"] == "completed"


@pytest.mark.parametrize("bad", ["Bad", "", "a" * 64, "with space", "x\n", "../etc", "a_b"])
def test_bad_names_are_refused_before_anything_runs(engine_factory, fake_claude_bin, fake_env,
                                                    prompt_file, bad, tmp_path):
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    for call in (lambda: engine.start(bad, str(prompt_file)), lambda: engine.continue_(bad, "x"),
                 lambda: engine.interrupt(bad), lambda: engine.status(bad)):
        with pytest.raises(SubagentError, match=r"^name: .*\[a-z0-9-\]\{1,63\}"):
            call()
    assert fake_log(tmp_path) == []


def test_prompt_file_rules(tmp_path):
    regular = tmp_path / "ok.md"
    regular.write_text("x")
    link_to_regular = tmp_path / "link.md"
    link_to_regular.symlink_to(regular)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link_to_dir = tmp_path / "dirlink"
    link_to_dir.symlink_to(tmp_path)
    link_to_fifo = tmp_path / "fifolink"
    link_to_fifo.symlink_to(fifo)
    unreadable = tmp_path / "secret.md"
    unreadable.write_text("x")
    unreadable.chmod(0)
    for good in (regular, link_to_regular):
        fd = open_prompt_file(str(good))
        assert stat.S_ISREG(os.fstat(fd).st_mode)
        os.close(fd)
    cases = {
        str(tmp_path / "missing.md"): "does not exist",
        str(tmp_path): "is a directory, not a regular file",
        str(link_to_dir): "is a directory, not a regular file",
        str(fifo): "is a FIFO, not a regular file",  # must not hang: opened O_NONBLOCK
        str(link_to_fifo): "is a FIFO, not a regular file",
        "relative/path.md": "must be an absolute path",
        "": "must be a non-empty path",
    }
    if os.geteuid() != 0:  # root reads mode-0 files: no refusal to see there
        cases[str(unreadable)] = "is not readable"
    for path, message in cases.items():
        with pytest.raises(SubagentError, match=r"^prompt_file: .*" + message):
            open_prompt_file(path)


def test_blank_prompts_are_refused(engine_factory, fake_claude_bin, fake_env, prompt_file):
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    with pytest.raises(SubagentError, match="^trigger: must be a non-empty text"):
        engine.start("blank", str(prompt_file), trigger="  \n")
    engine.start("blank", str(prompt_file), trigger="FAKE:reply=ok")
    todos.wait_upserts("blank")
    with pytest.raises(SubagentError, match="^prompt: must be a non-empty text"):
        engine.continue_("blank", "")


def test_start_archives_the_finished_session_of_that_name(engine_factory, fake_claude_bin, fake_env, prompt_file):
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    first = engine.start("again", str(prompt_file), trigger="first")
    todos.wait_upserts("again")
    second = engine.start("again", str(prompt_file), trigger="second")
    todos.wait_upserts("again", 2)
    assert second["session_id"] != first["session_id"]
    assert second["archived"] == [first["transcript"] + ".archived"]
    assert Path(first["transcript"] + ".archived").exists() and not Path(first["transcript"]).exists()
    status = engine.status("again")
    assert status["session_id"] == second["session_id"] and status["turns"] == 1


def test_a_start_whose_turn_ends_before_its_answer_still_lists_what_it_archived(engine_factory, fake_claude_bin,
                                                                                  fake_env, prompt_file):
    # Seen under parallel test load: the new turn ended (and the runner's unarchive ran) before start read
    # turn.archived for its answer, which then said archived=[] although the old transcript was archived.
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    first = engine.start("quick", str(prompt_file), trigger="first")
    todos.wait_upserts("quick")
    confirm = engine._confirm

    def confirm_after_the_turn_ended(turn):
        assert wait_for_turns(engine, lambda: turn.reported, 20), "the second turn never ended"
        return confirm(turn)

    engine._confirm = confirm_after_the_turn_ended  # forces the order the load produced
    second = engine.start("quick", str(prompt_file), trigger="second")
    assert second["archived"] == [first["transcript"] + ".archived"]
    assert Path(first["transcript"] + ".archived").exists()


def test_a_claude_this_daemon_did_not_start_blocks_the_session(engine_factory, fake_claude_bin, fake_env, prompt_file):
    """Claude's own registry (<config>/sessions/<pid>.json) names a live pid: two writers must not share a
    transcript."""
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    first = engine.start("shared", str(prompt_file), trigger="first")
    todos.wait_upserts("shared")
    sessions = Path(fake_env["HOME"]) / ".claude" / "sessions"
    sessions.mkdir(parents=True)
    me = psutil.Process()
    ticks = round((me.create_time() - psutil.boot_time()) * os.sysconf("SC_CLK_TCK"))
    record = {"pid": me.pid, "sessionId": first["session_id"], "name": "shared", "procStart": str(ticks)}
    (sessions / f"{me.pid}.json").write_text(json.dumps(record))
    with pytest.raises(SubagentError, match=f"running in another claude process \\(pid {me.pid}\\)"):
        engine.continue_("shared", "more")
    # status agrees with continue: running, in that pid (not "finished")
    seen = engine.status("shared")
    assert (seen["state"], seen["running"], seen["pid"]) == ("running", True, me.pid)
    listed = next(s for s in engine.status()["sessions"] if s["name"] == "shared")
    assert (listed["state"], listed["pid"]) == ("running", me.pid)
    # a wait on it says it cannot wait for another process's turn, at once
    from hivesubagent.tools import build_registry

    waited = build_registry(engine).call("status", {"name": "shared", "wait_seconds": 30})
    assert waited.text.splitlines()[-1].endswith("run by another claude process, not this daemon: "
                                                 "this daemon cannot wait for it")
    assert waited.data["wait"]["waited"] < 1
    with pytest.raises(SubagentError, match="running in another claude process"):
        engine.start("shared", str(prompt_file))
    # a stale record (a start time that is not this pid's) is ignored
    (sessions / f"{me.pid}.json").write_text(json.dumps({**record, "procStart": str(ticks + 1000)}))
    engine.continue_("shared", "FAKE:reply=fine")
    assert todos.wait_upserts("shared", 2)[1]["data"]["outcome"]["outcome"] == "completed"


def test_shutdown_interrupts_every_running_turn_and_refuses_new_ones(engine_factory, fake_claude_bin,
                                                                     fake_env, prompt_file):
    engine, todos = engine_factory(fake_claude_bin, fake_env, kill_grace=0.5)
    engine.start("s1", str(prompt_file), trigger="FAKE:sleep=60")
    engine.start("s2", str(prompt_file), trigger="FAKE:ignore-int FAKE:sleep=60")
    wait_running_in_fake(engine, "s1")
    wait_running_in_fake(engine, "s2")
    pids = [engine.running_view(n)["pid"] for n in ("s1", "s2")]
    engine.shutdown()
    assert running_names(engine) == []
    assert todos.upserts("s1")[0]["data"]["outcome"]["outcome"] == "interrupted"
    assert todos.upserts("s2")[0]["data"]["outcome"]["outcome"] == "killed"
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)
    with pytest.raises(SubagentError, match="shutting down"):
        engine.start("s3", str(prompt_file))


def test_unrunnable_claude_bin_is_a_clear_error(engine_factory, fake_env, prompt_file, tmp_path):
    engine, todos = engine_factory(str(tmp_path / "no-such-claude"), fake_env)
    with pytest.raises(SubagentError, match="cannot run claude_bin"):
        engine.start("nobin", str(prompt_file))
    assert running_names(engine) == [] and todos.calls == []


def test_parallel_starts_of_one_name_run_once(engine_factory, fake_claude_bin, fake_env, prompt_file, tmp_path):
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    results: list[str] = []

    def attempt():
        try:
            # Long enough that no attempt, however late under load, comes after the turn ended (the engine's
            # shutdown interrupts it at teardown).
            engine.start("race", str(prompt_file), trigger="FAKE:sleep=60")
            results.append("ok")
        except SubagentError as exc:
            results.append(str(exc))

    threads = [threading.Thread(target=attempt) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results.count("ok") == 1, results
    # The refused starts never spawned; the one that ran logs once its (loaded) interpreter is up.
    assert len(wait_until(lambda: fake_log(tmp_path), 30, "the fake claude's log line")) == 1
    assert len(SessionStore(engine.workdir, engine.env).find_all("race")) <= 1
    assert engine.running_view("race")["state"] in (T.RUNNING, T.STOPPING)


def test_a_leftover_holding_stdout_does_not_hold_the_turn(engine_factory, fake_claude_bin, fake_env, prompt_file,
                                                          tmp_path, monkeypatch):
    """Turn completion follows the process exit, not the pipe's EOF: a process that left claude's group may
    keep stdout open for as long as it lives."""
    import hivesubagent.turns.runner as runner_module

    monkeypatch.setattr(runner_module, "READER_DRAIN_SECONDS", 0.5)
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    pidfile = tmp_path / "holder.pid"
    engine.start("held", str(prompt_file), trigger=f"FAKE:holdpipe={pidfile}\nFAKE:reply=finished anyway")
    try:
        todo = todos.wait_upserts("held", seconds=30)[0]["data"]["outcome"]
        assert todo["outcome"] == "completed" and todo["result_text"] == "finished anyway"
        assert psutil.pid_exists(int(pidfile.read_text()))  # it really was still holding the pipe
        assert running_names(engine) == []
    finally:
        if pidfile.exists():
            psutil.Process(int(pidfile.read_text())).kill()


def test_a_start_that_cannot_spawn_puts_the_archive_back(engine_factory, fake_claude_bin, fake_env,
                                                         prompt_file, tmp_path):
    engine, todos = engine_factory(fake_claude_bin, fake_env)
    first = engine.start("kept", str(prompt_file), trigger="first")
    todos.wait_upserts("kept")
    broken, _ = engine_factory(str(tmp_path / "no-such-claude"), fake_env)
    with pytest.raises(SubagentError, match="cannot run claude_bin"):
        broken.start("kept", str(prompt_file))
    assert Path(first["transcript"]).is_file() and not Path(first["transcript"] + ".archived").exists()
    assert engine.status("kept")["session_id"] == first["session_id"]
