"""`status` waits against the REAL claude CLI (2.1.328) and the Messages API mock: a wait that ends on the first
of two turns, `all` (every one), and the answers' next call. Turns are held mid-way by the mock (MOCK:hold) and
released by the test, so which ends first is the test's choice, never a race."""

from __future__ import annotations

import json
import threading

import pytest
from daemon_harness import wait_until
from kit.subagent_testkit import Reports

from hivesubagent.tools import build_registry

pytestmark = pytest.mark.interop

ANSWER_LIMIT = 8192


class Call(threading.Thread):
    """One tool call on a thread of its own: the test releases turns while it waits."""

    def __init__(self, tools, name: str, args: dict):
        super().__init__(daemon=True)
        self.tools, self.tool, self.args, self.result = tools, name, args, None

    def run(self) -> None:
        self.result = self.tools.call(self.tool, self.args)

    def answer(self, seconds: float = 60.0):
        self.join(seconds)
        assert not self.is_alive(), f"{self.tool}({self.args}) did not answer within {seconds}s"
        return self.result


def held_turns(engine, mock_api, prompt_file, *names: str) -> None:
    """Start one turn per name, each held by the mock before its reply until released."""
    for name in names:
        engine.start(name, str(prompt_file), trigger=f"{name}-1 MOCK:hold={name}\nMOCK:reply={name} done")
    for name in names:  # the mock's state: nothing notifies us of it, so poll
        wait_until(lambda n=name: mock_api.holding(n), 60.0, f"the mock to hold {name}'s reply")


def test_a_wait_on_two_ends_when_the_first_ends(engine_factory, claude_bin, real_env, prompt_file, mock_api):
    engine, todos = engine_factory(claude_bin, real_env, max_running=2)
    tools = build_registry(engine)
    held_turns(engine, mock_api, prompt_file, "wa", "wb")
    # a third is refused, and the refusal says what to do: the very wait below
    refused = tools.call("start", {"name": "wc", "prompt_file": str(prompt_file)})
    assert refused.is_error and refused.text == (
        'refused: max_running=2 sessions are already running (wa, wb). Wait for one to end with '
        'status(names=["wa", "wb"], wait_seconds=30), then start again; or interrupt one of them')
    call = Call(tools, "status", {"names": ["wa", "wb"], "wait_seconds": 45})
    call.start()
    mock_api.release("wb")
    result = call.answer()
    assert not result.is_error, result.text
    lines = result.text.splitlines()
    assert lines[0].startswith("sessions=2 running=1 ended_during_wait=1 wait=first waited_s=")
    assert "wait_capped_s=30" in lines[0] and len(result.text.encode()) < ANSWER_LIMIT
    assert lines[1].startswith("name=wa state=running ") and lines[2].startswith("name=wb state=finished ")
    assert "last_outcome=completed" in lines[2]
    assert 'ended during the wait: wb; status(name="wb") shows the outcome and result' in result.text
    assert "files_changed=0 commands_run=0" in lines[2]
    assert lines[-1] == 'still running: wa; next: status(names=["wa"], wait_seconds=30) waits for the first of them'
    assert result.data["wait"]["ended"] == ["wb"] and result.data["wait"]["capped"] is True
    assert [s["name"] for s in result.data["sessions"]] == ["wa", "wb"]
    # wb had ended before this call: it does not end the next wait, which is for wa alone
    again = Call(tools, "status", {"names": ["wa", "wb"], "wait_seconds": 30})
    again.start()
    assert todos.wait_upserts("wb")  # (wb's end is long recorded; the wait goes on)
    assert again.is_alive()
    mock_api.release("wa")
    second = again.answer()
    assert second.data["wait"]["ended"] == ["wa"] and "none is running now" in second.text


def test_all_waits_for_every_one_and_one_name_waits_for_its_end(engine_factory, claude_bin, real_env,
                                                                prompt_file, mock_api):
    engine, todos = engine_factory(claude_bin, real_env)
    tools = build_registry(engine)
    held_turns(engine, mock_api, prompt_file, "xa", "xb")
    call = Call(tools, "status", {"names": ["xa", "xb"], "wait_seconds": 30, "all": True})
    call.start()
    mock_api.release("xa")
    todos.wait_upserts("xa")
    assert call.is_alive(), "an all-wait answered when only the first had ended"
    single = Call(tools, "status", {"name": "xb", "wait_seconds": 30})
    single.start()
    mock_api.release("xb")
    result = call.answer()
    assert sorted(result.data["wait"]["ended"]) == ["xa", "xb"] and result.data["wait"]["all"] is True
    assert result.text.splitlines()[0].startswith("sessions=2 running=0 ")
    one = single.answer()
    assert one.data["running"] is False and one.data["last_turn"]["result_text"] == "xb done"
    assert one.text.splitlines()[-1].endswith("the turn ended during the wait ("
                                              + f"{one.data['wait']['waited']:.1f}s)")
    # a short wait on a session that is not running answers at once and says so
    idle = tools.call("status", {"name": "xa", "wait_seconds": 5})
    assert idle.text.splitlines()[-1].endswith("not running: nothing to wait for") and idle.data["wait"]["waited"] < 5


def test_wait_arguments_are_checked(engine_factory, claude_bin, real_env, prompt_file):
    engine, _ = engine_factory(claude_bin, real_env)
    tools = build_registry(engine)
    cases = {
        '{"name": "a", "names": ["b"]}': "names: give name (one session) or names (several), not both",
        '{"all": true, "name": "a"}': "all: goes with names",
        '{"wait_seconds": 3}': "wait_seconds: goes with name or names",
        '{"names": ["nobody"]}': "names: no session named 'nobody'",
        '{"names": ["a"], "result_offset": 3}': "result_offset: pages one finished session's result",
    }
    for args, message in cases.items():
        result = tools.call("status", json.loads(args))
        assert result.is_error and message in result.text, (args, result.text)



def test_a_wait_reports_the_turns_progress_and_a_cancel_ends_it(engine_factory, claude_bin, real_env,
                                                                prompt_file, mock_api):
    from common.protocol.call_progress import Cancellation

    engine, _ = engine_factory(claude_bin, real_env)
    engine.start("pw", str(prompt_file), trigger='pw-1 MOCK:hold=pw\nMOCK:tool=Bash {"command": "echo waited-on"}')
    reports, cancel, answer = Reports(), Cancellation(), {}
    waiter = threading.Thread(target=lambda: answer.update(engine.wait_status(["pw"], 30, progress=reports,
                                                                              cancel=cancel)),
                              daemon=True)
    waiter.start()
    # the wait's own reports: nothing notifies the test of them, so poll
    wait_until(lambda: any("pw: " in m and "Bash" in m for m in reports.messages), 30,
               "a progress report naming the Bash call")
    assert all(len(m) < 200 and m.startswith("waited ") for m in reports.messages), reports.messages
    cancel.fire()
    waiter.join(5)
    assert not waiter.is_alive(), "a cancelled wait did not end"
    assert answer["sessions"][0]["running"] is True and answer["wait"]["waited"] < 30
    mock_api.release("pw")
