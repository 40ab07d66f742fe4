"""Processes a task leaves behind are reported where its end is reported: in the inline answer that shows the
end and in the completion todo, not only in a later status (docs/tools/bash.md, status)."""

from kit.gate import Gate
from kit.hivebash_testkit import wait_until

from hivebash.answers.texts import outcome_result


def test_an_inline_result_names_the_leftover_processes(engine):
    outcome = engine.run("setsid sleep 30 & echo started", wait_seconds=20, name="inline")
    answer = outcome_result(outcome, started_form=True)
    assert answer.data["status"] == "done" and len(answer.data["leftover_pids"]) == 1, answer.text
    assert "leftover_processes=1" in answer.text.splitlines()[0]
    assert "the shell exited; 1 process it started still runs" in answer.text
    engine.kill("inline", force=True)
    assert wait_until(lambda: engine.status("inline").view.leftovers == [], timeout=10)


def test_the_completion_todo_names_the_leftover_processes(engine, todos, tmp_path):
    gate = Gate(tmp_path)  # held until its running todo is out
    engine.run(f"{gate.wait}; setsid sleep 30 & echo started", wait_seconds=0, name="later")
    todos.wait_upserts("later")
    gate.open()
    done = todos.wait_upserts("later", count=2)[-1]
    assert "leftover_processes=1" in done["summary"], done
    assert "the shell exited; 1 process it started still runs" in done["body"], done
    assert len(done["data"]["leftover_pids"]) == 1
    engine.kill("later", force=True)
    assert wait_until(lambda: engine.status("later").view.leftovers == [], timeout=10)
