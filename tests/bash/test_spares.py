"""Spare files (hivebash/disk/spares.py): a later run's output files and record temp files, made once a run's answer
is sent, then taken by the next unnamed run; never shared with a task, never left behind by a clean stop, and
removed at start when a dead daemon left them."""

import os

from common.protocol import after_answer
from hivebash.disk.spares import SpareFiles
from hivebash.disk.store import TaskStore


def spare_files(store, task_id):
    return sorted(n for n in os.listdir(store.dir) if task_id in n)


def test_the_next_unnamed_run_takes_the_files_made_after_an_answer(engine):
    engine.run("true", wait_seconds=10)  # outside a request, its after-answer work runs at once
    [spare_id] = list(engine.spares._spares)
    assert spare_files(engine.store, spare_id) == [f".{spare_id}.json.tmp", f".{spare_id}.next.json.tmp",
                                                   f"{spare_id}.err", f"{spare_id}.out"]
    made = os.stat(engine.store.path(spare_id, "out")).st_ino
    second = engine.run("echo hi", wait_seconds=10).view
    assert second.task.id == spare_id and second.task.state == "done" and second.stdout.text == "hi\n"
    assert os.stat(engine.store.path(spare_id, "out")).st_ino == made  # written into the spare's file
    # Both temp files were used: the pending record's, then the terminal record's; none is left.
    assert spare_files(engine.store, spare_id) == [f"{spare_id}.err", f"{spare_id}.json", f"{spare_id}.out"]


def test_a_name_equal_to_a_spare_id_drops_the_spare(engine):
    engine.run("true", wait_seconds=10)
    [spare_id] = list(engine.spares._spares)
    named = engine.run("echo named", name=spare_id, wait_seconds=10).view
    assert named.task.id == spare_id and named.stdout.text == "named\n"
    assert spare_id not in engine.spares._spares
    assert spare_files(engine.store, spare_id) == [f"{spare_id}.err", f"{spare_id}.json", f"{spare_id}.out"]


def test_a_clean_stop_removes_the_spares_files(make_engine):
    engine = make_engine()
    engine.run("true", wait_seconds=10)
    [spare_id] = list(engine.spares._spares)
    engine.shutdown()
    assert spare_files(engine.store, spare_id) == []


def test_a_start_removes_a_dead_daemons_spares_and_keeps_everything_else(tmp_path):
    store = TaskStore(tmp_path / "state")
    dead = SpareFiles(store)
    assert dead.reserve("0badf00d")
    dead.make("0badf00d")  # never taken, never closed: the daemon died
    out, err = store.prepare("written")  # output without a record, but with bytes in it: kept
    os.write(out, b"x")
    os.close(out)
    os.close(err)
    later = TaskStore(tmp_path / "state")
    assert later.load_all() == []
    assert sorted(os.listdir(later.dir)) == ["written.err", "written.out"]


def test_spares_are_made_only_up_to_the_kept_number(tmp_path):
    spares = SpareFiles(TaskStore(tmp_path), kept=1)
    assert spares.reserve("aaaaaaaa") and not spares.reserve("bbbbbbbb")
    assert spares.holds("aaaaaaaa")  # while being made, no task may take the id
    spares.make("aaaaaaaa")
    assert spares.holds("aaaaaaaa") and spares.take().id == "aaaaaaaa" and spares.take() is None
    assert not spares.holds("aaaaaaaa")


def test_a_spare_whose_id_has_files_already_is_not_made(tmp_path):
    store = TaskStore(tmp_path)
    for fd in store.prepare("cccccccc"):
        os.close(fd)
    spares = SpareFiles(store)
    assert spares.reserve("cccccccc")
    spares.make("cccccccc")  # O_EXCL refuses: the existing files stay as they are
    assert spares.take() is None and not spares.holds("cccccccc")
    assert sorted(os.listdir(store.dir)) == ["cccccccc.err", "cccccccc.out"]


def test_after_answer_work_waits_for_the_answer_to_be_closed():
    ran = []
    after_answer.begin()
    after_answer.after_answer(lambda: ran.append("work"))
    body = after_answer.answer_then_run([b"answer"])
    assert ran == [] and list(body) == [b"answer"]
    body.close()
    assert ran == ["work"]


def test_after_answer_work_that_fails_is_logged_and_the_rest_still_runs(caplog):
    ran = []
    after_answer.begin()
    after_answer.after_answer(lambda: 1 / 0)
    after_answer.after_answer(lambda: ran.append("second"))
    after_answer.answer_then_run([]).close()
    assert ran == ["second"] and "work after an answer failed" in caplog.text


def test_a_spare_that_cannot_be_made_frees_its_reservation(tmp_path, caplog):
    store = TaskStore(tmp_path)
    spares = SpareFiles(store)

    def broken(task_id):
        raise RuntimeError("a bug")

    store.make_spare = broken
    assert spares.reserve("dddddddd")
    spares.make("dddddddd")  # never raises: the next run makes its own files
    assert "a bug" in caplog.text and not spares.holds("dddddddd")
    assert spares.reserve("eeeeeeee"), "a failed spare must not block every later one"
