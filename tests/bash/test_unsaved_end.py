"""An end the disk could not take where even the room reserved at the task's start does not
help (here: a file system treated as keeping no blocks ahead, on a real full tmpfs), every answer and the todo
say so, a restart says only what was saved, and the daemon saves the end once there is room."""

import json
import os

from kit.daemons_kit import running_record_written
from kit.gate import Gate
from kit.hivebash_testkit import TodoRecorder, settings, wait_until

from common.protocol.tools import CallContext
from hivebash.engine import Engine
from hivebash.tools import build_registry

AGENT = CallContext(structured=True)
WARNING = ("warning: the end is not saved: the state disk is full (No space left on device); a restart will "
           "report this task as interrupted")


def _engine(small_disk, todos):
    # No --max-state-bytes quota: the full disk itself is under test (the quota would empty the outputs first).
    engine = Engine(settings(small_disk.root, agent_socket=small_disk.root / "agent.sock", max_state_bytes="0"), todos)
    engine.open()
    return engine


def test_an_end_that_cannot_be_saved_is_said_and_saved_later(small_disk, todos, tmp_path):
    engine = _engine(small_disk, todos)
    try:
        engine.store.room.can_reserve = False  # as on a file system without fallocate: no room kept for the end
        tools = build_registry(engine)
        gate = Gate(tmp_path)  # off the small disk: the flood starts once the running record is written
        tools.call("run", {"cmd": f"{gate.wait}; yes", "name": "victim", "wait_seconds": 0}, AGENT)
        record = engine.store.path("victim", "json")
        wait_until(lambda: running_record_written(record, os.getpid()), 10, "the running record on disk")
        gate.open()
        body = todos.wait_upserts("victim", 2)[-1]["body"]
        assert "finished: status=done exit_code=1" in body and WARNING in body, body
        answer = tools.call("status", {"id": "victim"}, AGENT)
        assert WARNING in answer.text and answer.data["end_saved"] is False, answer.text
        assert json.loads(record.read_text())["state"] != "done"

        # a restart after a crash, on the full disk
        again = Engine(settings(small_disk.root, max_state_bytes="0"), TodoRecorder())
        again.open()  # must not fail: its own records cannot be written either
        view = build_registry(again).call("status", {"id": "victim"}, AGENT)
        assert view.data["status"] == "interrupted" and "while the task was running" in view.data["note"], view.text
        assert "warning: the end is not saved" in view.text
        again.shutdown(timeout=5)

        engine.store.path("victim", "out").unlink()  # the operator frees the disk
        engine.rooms.lifecycle.retry_unsaved()  # what the housekeeper does every 30 s
        assert json.loads(record.read_text())["state"] == "done"
        assert "warning" not in tools.call("status", {"id": "victim"}, AGENT).text
    finally:
        engine.shutdown(timeout=5)
