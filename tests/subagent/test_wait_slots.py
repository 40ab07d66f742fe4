"""The subagent daemon's `status` waits, driven by the fake claude (a turn that sleeps or waits at a gate is all a
wait needs; tests/subagent/test_interop_waits.py waits on the real claude). They share the bash daemon's
wait-slot rule (common/waiting.WaitSlots): with every slot taken, a waiting `status` answers at once with
`wait_skipped=busy` and the call to try again, instead of taking another request thread; the slot is free
again once its wait has ended. With `all`, a wait on several turns goes on past the first end."""

from __future__ import annotations

import threading

from daemon_harness import wait_until
from kit.gate import Gate
from kit.subagent_testkit import Reports

from common.protocol.tools import CallContext
from hivesubagent.tools import build_registry


def _taken(slots) -> bool:
    """Whether every slot is taken (a free one is given straight back)."""
    if slots.try_acquire():
        slots.release()
        return False
    return True


def test_a_wait_with_every_slot_taken_answers_at_once_busy(engine_factory, fake_claude_bin, fake_env, prompt_file):
    engine, _ = engine_factory(fake_claude_bin, fake_env, max_inline_waits=1)
    tools = build_registry(engine)
    engine.start("long", str(prompt_file), trigger="FAKE:sleep=60")

    def hold() -> None:  # (again if a probe of _taken had the slot for that instant)
        while "wait_skipped=busy" in tools.call("status", {"name": "long", "wait_seconds": 30}).text:
            pass

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        wait_until(lambda: _taken(engine.slots), 10, "the first wait to take the only slot")
        text = tools.call("status", {"name": "long", "wait_seconds": 5}).text
        assert "wait_skipped=busy" in text, text
        assert ("(no inline wait: every inline-wait slot is taken by other calls; do not retry at once: do other work "
                'first, or interrupt the turns you no longer wait for; then status(name="long", wait_seconds=30) tries '
                "again)") in text, text
        several = tools.call("status", {"names": ["long"], "wait_seconds": 5}).text
        assert "wait_skipped=busy" in several, several
    finally:
        engine.interrupt("long", force=True)  # the holder's wait ends with the turn
        holder.join(10)
    assert not holder.is_alive()
    engine.start("next", str(prompt_file), trigger="FAKE:sleep=60")
    after = tools.call("status", {"name": "next", "wait_seconds": 0.5}).text  # the slot came back: it waits
    assert "wait_skipped" not in after and "still running" in after, after
    engine.interrupt("next", force=True)



def test_an_all_wait_goes_on_past_the_first_end(engine_factory, fake_claude_bin, fake_env, prompt_file, tmp_path):
    engine, _ = engine_factory(fake_claude_bin, fake_env)
    tools = build_registry(engine)
    gates = {name: Gate(tmp_path) for name in ("xa", "xb")}
    for name, gate in gates.items():
        engine.start(name, str(prompt_file), trigger=f"FAKE:gate={gate.path}")
    reports, answer = Reports(), {}
    waiting = threading.Thread(target=lambda: answer.update(result=tools.call(
        "status", {"names": ["xa", "xb"], "wait_seconds": 30, "all": True}, CallContext(progress=reports))))
    waiting.start()
    try:
        gates["xa"].open()
        # the wait's own report that it saw xa end and still waits (its reports come at most one a second)
        wait_until(lambda: any("xa: ended" in m for m in reports.messages), 10, "the all-wait to go on past xa's end")
        assert waiting.is_alive(), answer
    finally:
        gates["xb"].open()
        waiting.join(20)
    result = answer["result"]
    assert sorted(result.data["wait"]["ended"]) == ["xa", "xb"] and result.data["wait"]["all"] is True, result.text
    assert result.text.startswith("sessions=2 running=0 ended_during_wait=2 wait=all "), result.text
