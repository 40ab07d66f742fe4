"""A task whose output passed --max-output-bytes: its answers and its todo say so in one line, its status data
gives bytes written and kept, and `hive-bash tail -f` copies its file past the dropped range, never a NUL of it,
also when the range widens while the copy reads (a real file, punched as the output guard punches it)."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from kit.hivebash_testkit import punch_lines, wait_until

from hivebash.answers.texts import outcome_result
from hivebash.cli import main
from hivebash.cli_tail import KeptCopier
from hivebash.output_views.kept import Gap

LIMIT = 1 << 20
DAEMON = str(Path(sys.executable).parent / "hive-bash-daemon")


def _row(n: int) -> bytes:
    return b"row %d\n" % n


def _task(engine, tid):
    with engine.registry.locked() as tasks:
        return tasks.get(tid).task


def test_the_answer_and_the_todo_say_once_that_stdout_passed_the_limit(make_engine, tmp_path, todos):
    engine = make_engine(state_dir=tmp_path / "state", max_output_bytes=LIMIT)
    tid = engine.run("sleep 0.3; seq 1 1500000", wait_seconds=0).view.task.id
    wait_until(lambda: todos.calls and "finished" in todos.calls[-1][3], 30, "the completion todo")
    body = todos.calls[-1][3]
    assert body.count("stdout passed 1 MiB; the middle was dropped (") == 1, body
    assert "NUL" in body and f'status(id="{tid}", grep=' in body, body
    answer = outcome_result(engine.status(tid), False)
    assert answer.text.count("passed 1 MiB") == 1 and answer.text.count("over --max-output-bytes") == 0, answer.text
    assert "\n--- stdout: " in answer.text and " written, " in answer.text and " kept (" in answer.text
    stdout = answer.data["stdout"]
    start, end, limit = engine.status(tid).view.task.dropped["stdout"]
    out = tmp_path / "state" / "bash-tasks" / f"{tid}.out"
    assert stdout["written_bytes"] == stdout["size"] == os.path.getsize(out)
    assert stdout["kept_bytes"] == stdout["size"] - (end - start)
    assert stdout["dropped"] == {"from_byte": start, "to_byte": end, "bytes": end - start, "limit": LIMIT,
                                 "over": "--max-output-bytes"}
    assert "dropped" not in answer.data["stderr"] and "passed" not in outcome_result(
        engine.run("echo small", wait_seconds=10), True).text


def test_the_copy_skips_the_range_and_one_that_widens_while_it_reads(tmp_path):
    path = tmp_path / "t.out"
    path.write_bytes(b"".join(_row(n) for n in range(1, 200_001)))
    size = path.stat().st_size
    start, end = punch_lines(path, 64 << 10, size // 2)
    recorded = [Gap(start, end, LIMIT)]
    out = io.BytesIO()
    fd = os.open(path, os.O_RDONLY)
    try:
        copier = KeptCopier(fd, out, 0, lambda: recorded[-1])
        copier.start(None)
        copier.copy()
        first = out.getvalue()
        # The task writes on and the guard frees more: from the old start to past what the copy has seen.
        with open(path, "ab") as f:
            f.write(b"".join(_row(n) for n in range(200_001, 400_001)))
        resumed, wider_end = punch_lines(path, end, size + (size // 4))
        assert resumed == end  # one dropped range, widened
        recorded.append(Gap(start, wider_end, LIMIT))
        copier.copy()
    finally:
        os.close(fd)
    text = out.getvalue()
    assert b"\0" not in text
    lines = text.decode().splitlines()
    head_rows = path.read_bytes()[:start].count(b"\n")
    assert lines[head_rows - 1] == f"row {head_rows}" and lines[head_rows].startswith("[... ") and \
        "dropped from the middle: over --max-output-bytes 1 MiB ...]" in lines[head_rows], lines[head_rows]
    assert first.endswith(b"row 200000\n") and lines[-1] == "row 400000"
    assert sum("more dropped from the middle" in line for line in lines) == 1
    # every row that is shown is whole, once, and in order
    rows = [int(line.split()[1]) for line in lines if line.startswith("row ")]
    assert rows == sorted(set(rows)) and rows[0] == 1


@pytest.mark.slow
def test_tail_follow_of_a_flood_prints_no_nul(daemon_factory, tmp_path):
    d = daemon_factory([DAEMON, "--state-dir", str(tmp_path / "state"), "--max-output-bytes", str(LIMIT)])
    runner = CliRunner()
    started = runner.invoke(main, ["--url", d.url, "run", "--name", "flood",
                                   "for i in $(seq 1 40); do seq 1 200000; sleep 0.05; done"])
    assert started.exit_code == 0, started.output
    done = runner.invoke(main, ["--url", d.url, "tail", "-f", "-c", "100000000", "flood"], catch_exceptions=False)
    out = done.stdout_bytes
    assert done.exit_code == 0 and b"\0" not in out, out[:200]
    assert b"dropped from the middle: over --max-output-bytes 1 MiB ...]" in out
    assert out.startswith(b"1\n2\n3\n") and out.endswith(b"\n199999\n200000\n")


def test_a_restart_finds_the_hole_wider_than_the_saved_record_and_says_it_right(make_engine, tmp_path):
    """The first range reaches the record at once, wider ones with the next record: a daemon that dies (here:
    its guard stops and a second daemon takes the state directory over) leaves a record whose range ends short
    of the file's hole, and a file its processes wrote on past the limit. The restart settles both."""
    state = tmp_path / "state"
    first = make_engine(state_dir=state, max_output_bytes=LIMIT)
    tid = first.run("while :; do seq 1 100000; sleep 0.01; done", wait_seconds=0).view.task.id
    record = state / "bash-tasks" / f"{tid}.json"

    def widened():
        saved = json.loads(record.read_text()).get("dropped") or {}
        live = _task(first, tid).dropped or {}
        return "stdout" in saved and live.get("stdout", [0, 0])[1] > saved["stdout"][1]
    wait_until(widened, 30, "a range wider than the saved one")
    first.rooms.lifecycle.guard.close()  # the old daemon's looks stop: its task writes on past the limit
    out = state / "bash-tasks" / f"{tid}.out"
    wait_until(lambda: os.stat(out).st_blocks * 512 > 2 * LIMIT, 30, "the file past the limit")
    second = make_engine(state_dir=state, max_output_bytes=LIMIT)
    view = second.status(tid).view
    assert view.task.state == "interrupted", view.task
    start, end, _ = view.task.dropped["stdout"]
    data = out.read_bytes()
    assert data[start:end].strip(b"\0") == b"" and data[end:end + 1] not in (b"\0", b""), (start, end)
    assert b"\0" not in data[end:] and b"\0" not in data[:start]
    assert os.stat(out).st_blocks * 512 <= LIMIT
    text = view.output.text
    assert "\0" not in text and "\\x00" not in text and "dropped from the middle" in text


@pytest.mark.slow
def test_attach_to_a_tty_flood_prints_no_nul(daemon_factory, tmp_path):
    d = daemon_factory([DAEMON, "--state-dir", str(tmp_path / "state"), "--max-output-bytes", str(LIMIT)])
    started = CliRunner().invoke(main, ["--url", d.url, "run", "--stdin", "tty", "--name", "tty-flood",
                                        "for i in $(seq 1 40); do seq 1 200000; sleep 0.05; done"])
    assert started.exit_code == 0, started.output
    # A real process: attach reads its stdin's fd (empty: it follows the task to its end).
    proc = subprocess.run([str(Path(sys.executable).parent / "hive-bash"), "--url", d.url, "attach", "tty-flood"],
                          input=b"", capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert b"\0" not in proc.stdout and b"dropped from the middle: over --max-output-bytes 1 MiB ...]" in proc.stdout
    assert proc.stdout.endswith(b"199999\r\n200000\r\n") or proc.stdout.endswith(b"199999\n200000\n"), proc.stdout[-80:]


def test_failure_lines_wait_for_and_new_only_across_the_gap_name_lines_honestly(make_engine, tmp_path):
    engine = make_engine(state_dir=tmp_path / "state", max_output_bytes=LIMIT)
    failed = engine.run("seq 1 1450000; echo 'error: the one that matters'; seq 1450001 1500000; exit 3",
                        wait_seconds=30)
    text = outcome_result(failed, False).text
    assert failed.view.task.dropped and "\0" not in text and "\\x00" not in text
    line = next(x for x in failed.view.failures if "the one that matters" in x.text)
    assert line.from_gap and f"stdout:~{line.number}: error: the one that matters" in text, text
    # the number is the one a window takes: the line it names is that line
    window = engine.status(failed.view.task.id, from_line=line.number, max_lines=1).view.output.text
    assert f"~{line.number}: error: the one that matters" in window, window

    live = engine.run("seq 1 1500000; sleep 0.5; echo READY; sleep 30", wait_seconds=0).view.task.id
    seen = []
    found = engine.status(live, wait_for="^READY", wait_seconds=20)
    answer = outcome_result(found, False).text
    assert found.matched is not None and found.matched.from_gap, answer
    assert f"stdout line ~{found.matched.number}): READY" in answer and "\0" not in answer, answer
    for _ in range(5):  # new_only polls after the gap: no NUL, the cursor past it
        seen.append(outcome_result(engine.status(live, new_only=True), False).text)
    assert all("\0" not in s and "\\x00" not in s for s in seen)
    engine.kill(live, force=True, wait_seconds=10)


def test_send_after_the_gap_marks_the_line_it_matched(make_engine, tmp_path):
    from hivebash.tools.send import send_result
    engine = make_engine(state_dir=tmp_path / "state", max_output_bytes=LIMIT)
    tid = engine.run("seq 1 1500000; read x; echo \"got $x\"; sleep 30", stdin="pipe", wait_seconds=0).view.task.id
    wait_until(lambda: _task(engine, tid).dropped, 30, "the first dropped range")
    wait_until(lambda: engine.status(tid).view.stdout.size >= 10_888_896, 30, "all the rows")
    sent = engine.send(tid, text="hi", wait_for="^got", wait_seconds=20)
    text = send_result(sent).text
    assert sent.matched is not None and sent.matched.from_gap, text
    assert f"wait_for matched (stdout line ~{sent.matched.number}): got hi" in text and "\0" not in text, text
    engine.kill(tid, force=True, wait_seconds=10)
