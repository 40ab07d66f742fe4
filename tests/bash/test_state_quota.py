"""--max-state-bytes on a small real tmpfs (tests/small_disk.py, 128 MiB: the `small_disk` fixture's 2 MiB hold
no output past a quota of whole MiB): finished tasks' outputs go oldest first,
their records staying and saying so, then the middles of the largest running ones; the housekeeper logs it."""

import json
import logging
import os

import click
import pytest
from kit.hivebash_testkit import settings, wait_until
from small_disk import mount_small_disk, unmount

from hivebash.answers.texts import outcome_result
from hivebash.disk.state_quota import quota_bytes

MIB = 1 << 20
QUOTA = 24 * MIB


@pytest.fixture
def disk(tmp_path):
    mounted = mount_small_disk(tmp_path / "disk", 128 * MIB)
    yield mounted
    unmount(mounted)


def _blocks(path) -> int:
    try:
        return os.stat(path).st_blocks * 512
    except FileNotFoundError:
        return 0


def _outputs(state) -> int:
    return sum(_blocks(p) for p in (state / "bash-tasks").iterdir() if p.suffix in (".out", ".err"))


def test_the_oldest_finished_outputs_go_first_and_their_records_say_so(disk, make_engine, caplog):
    state = disk.root / "state"
    engine = make_engine(state_dir=state, max_state_bytes=str(QUOTA), max_output_bytes=64 * MIB)
    ids = []
    for i in range(5):  # 8 MiB each (incompressible enough for a tmpfs: it stores what it is given)
        done = engine.run(f"head -c {8 * MIB} /dev/urandom | base64 -w 100; echo task {i} >&2", wait_seconds=30)
        assert done.view.task.state == "done", done.view.task
        ids.append(done.view.task.id)
    caplog.set_level(logging.INFO, logger="hivebash.disk.state_quota")
    engine._housekeep(True)  # the full pass (the housekeeper's every 30 s)
    assert _outputs(state) <= QUOTA, _outputs(state)
    pruned = [tid for tid in ids if engine.status(tid).view.task.output_pruned]
    assert pruned and pruned == ids[: len(pruned)], (pruned, ids)  # oldest first
    assert ids[-1] not in pruned and engine.status(ids[-1]).view.stdout.size > 0
    old = engine.status(ids[0]).view
    assert old.task.state == "done" and old.stdout.size == 0
    assert "output: pruned for space: the outputs passed --max-state-bytes 24.0MiB" in \
        outcome_result(engine.status(ids[0]), False).text
    record = json.loads((state / "bash-tasks" / f"{ids[0]}.json").read_text())
    assert "pruned for space" in record["output_pruned"] and record["state"] == "done"
    assert any("--max-state-bytes" in r.getMessage() and "freed" in r.getMessage() for r in caplog.records)


def test_the_answer_of_a_pruned_task_says_its_output_was_pruned(disk, make_engine):
    engine = make_engine(state_dir=disk.root / "state", max_state_bytes=str(4 * MIB))
    tid = engine.run(f"head -c {6 * MIB} /dev/zero | tr '\\0' x", wait_seconds=30).view.task.id
    engine._housekeep(True)
    text = outcome_result(engine.status(tid), False).text
    assert "output: pruned for space: the outputs passed --max-state-bytes 4.0MiB; its files were emptied" in text


def test_then_the_middles_of_the_largest_running_ones_go(disk, make_engine):
    state = disk.root / "state"
    engine = make_engine(state_dir=state, max_state_bytes=str(QUOTA), max_output_bytes=64 * MIB)
    small = engine.run("while :; do echo small; sleep 0.05; done", wait_seconds=0).view.task.id
    big = engine.run("while :; do seq 1 100000; sleep 0.005; done", wait_seconds=0).view.task.id
    out = state / "bash-tasks" / f"{big}.out"
    # The guard rings the housekeeper once the outputs pass the quota; its pass frees the big one's middle.
    wait_until(lambda: (engine.status(big).view.task.dropped or {}).get("stdout"), 60, "the big task's middle freed")
    start, end, limit, knob = engine.status(big).view.task.dropped["stdout"]
    assert (limit, knob) == (QUOTA, "state") and start > 0 and end > start
    most = 0
    for _ in range(200):  # the outputs stay near the quota while it writes on
        most = max(most, _outputs(state))
    assert most <= QUOTA + 16 * MIB, most
    text = engine.status(big).view.output.text
    assert "\0" not in text and "\\x00" not in text and "dropped from the middle" in text
    said = outcome_result(engine.status(big), False).text
    assert "output: the outputs passed --max-state-bytes 24 MiB; the middle of stdout was dropped (" in said, said
    assert not engine.status(small).view.task.dropped
    engine.kill(big, force=True, wait_seconds=10)
    engine.kill(small, force=True, wait_seconds=10)
    assert _blocks(out) > 0


@pytest.mark.parametrize("given, rule", [("-5", "byte count"), ("150%", "at most 100%"), ("lots", "byte count")])
def test_a_bad_quota_is_refused_naming_the_knob(tmp_path, given, rule):
    with pytest.raises(click.BadParameter) as err:
        settings(tmp_path, max_state_bytes=given).validate()
    assert rule in str(err.value) and err.value.param_hint == "--max-state-bytes"


def test_a_share_is_of_the_state_filesystem(disk):
    info = os.statvfs(disk.root)
    assert quota_bytes("25%", disk.root) == info.f_blocks * info.f_frsize // 4
    assert quota_bytes("0", disk.root) == 0 and quota_bytes("1048576", disk.root) == MIB
