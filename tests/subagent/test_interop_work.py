"""What a turn did, against the REAL claude CLI (2.1.328) and the Messages API mock: the files it wrote or
edited and the commands it ran, in the todo and in status, and the turn paged as readable steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hivesubagent.tools import build_registry
from hivesubagent.transcripts.log import read_turns, render

pytestmark = pytest.mark.interop

ANSWER_LIMIT = 8192


def tool(name: str, **arguments) -> str:
    return f"MOCK:tool={name} {json.dumps(arguments)}"


def test_the_outcome_lists_the_files_written_and_the_commands_run(engine_factory, claude_bin, real_env,
                                                                  prompt_file, tmp_path):
    engine, todos = engine_factory(claude_bin, real_env)
    tools = build_registry(engine)
    work = engine.workdir
    outside = tmp_path / "outside.txt"
    steps = [tool("Write", file_path=str(work / "notes" / "a.txt"), content="one\n"),
             tool("Edit", file_path=str(work / "notes" / "a.txt"), old_string="one", new_string="two"),
             tool("Write", file_path=str(outside), content="far\n"),
             *(tool("Bash", command=f"echo step-{i}") for i in range(4))]
    engine.start("worker", str(prompt_file), trigger="worker-1\n" + "\n".join(steps))
    todo = todos.wait_upserts("worker")[0]
    outcome = todo["data"]["outcome"]
    assert outcome["outcome"] == "completed", outcome
    assert (work / "notes" / "a.txt").read_text() == "two\n"  # claude really ran them
    assert outcome["work"] == {"files_changed": 2, "files": ["notes/a.txt", str(outside)], "files_more": 0,
                               "commands_run": 4, "last_commands": ["echo step-1", "echo step-2", "echo step-3"]}
    assert f"files changed: 2 (notes/a.txt, {outside})" in todo["body"].splitlines()
    assert "commands run: 4; last: `echo step-1` | `echo step-2` | `echo step-3`" in todo["body"].splitlines()
    status = tools.call("status", {"name": "worker"})
    assert f"files changed: 2 (notes/a.txt, {outside})" in status.text.splitlines()
    assert status.data["last_turn"]["work"]["commands_run"] == 4
    # a restarted daemon (nothing in memory) reads the same from the transcript
    engine.shutdown()
    restarted, _ = engine_factory(claude_bin, real_env)
    assert restarted.status("worker")["last_turn"]["work"] == outcome["work"]

    # the next turn counts only its own work
    engine2 = restarted
    engine2.continue_("worker", "worker-2 " + tool("Bash", command="echo only-this"))
    second = _.wait_upserts("worker")[0]["data"]["outcome"]["work"]
    assert second["commands_run"] == 1 and second["files_changed"] == 0
    assert second["last_commands"] == ["echo only-this"]


def test_steps_page_the_turn_as_the_log_shows_it(engine_factory, claude_bin, real_env, prompt_file):
    engine, todos = engine_factory(claude_bin, real_env)
    tools = build_registry(engine)
    # 16 calls whose results the log shortens to 500 characters each: more than one page of steps
    trigger = "steps-1\n" + "\n".join(tool("Bash", command=f"seq {n} {n + 300}") for n in range(16))
    engine.start("stepper", str(prompt_file), trigger=trigger)
    todos.wait_upserts("stepper")
    pages, offset, answer = [], 0, None
    while offset is not None:
        answer = tools.call("status",
                            {"name": "stepper", "steps": True, **({"steps_offset": offset} if offset else {})})
        assert not answer.is_error and len(answer.text.encode()) < ANSWER_LIMIT, answer.text[:300]
        got = answer.data["steps_page"]
        pages.append(got["text"])
        offset = got["next_offset"]
        if offset is not None:
            assert answer.text.splitlines()[-1].endswith('status(name="stepper", steps=true, '
                                                         f'steps_offset={offset}) reads on')
    assert answer.text.endswith("(end of the steps)") and len(pages) >= 2
    transcript = Path(answer.data["transcript"])
    assert "".join(pages) == render(read_turns(transcript)[-1:])  # what hive-subagent log shows of the turn
    assert "-> Bash(" in pages[0] and '"seq 0 300"' in pages[0] and '"seq 15 315"' in pages[-1]
    past = tools.call("status", {"name": "stepper", "steps": True, "steps_offset": 10**6})
    assert past.is_error and "steps_offset: 1000000 is past the end" in past.text
