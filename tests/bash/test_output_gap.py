"""Views across a dropped middle: a real file of numbered lines whose middle is freed as the output guard frees it
(a hole punched with fallocate), read by tail, grep, windows, new_only, wait_for and the failure lines. No view
shows a NUL of the hole; each says what was dropped; numbers before the gap are exact, those after it marked."""

import os

import pytest
from kit.hivebash_testkit import punch_lines

from hivebash import output_views as ov

LINES = 200_000
LIMIT = 1 << 20


def _row(n: int) -> bytes:
    return f"row {n} of the numbered output\n".encode()


@pytest.fixture
def holed(tmp_path):
    """A file of LINES numbered rows with bytes ~[128 KiB, size - 512 KiB) punched out, cut at line ends."""
    path = tmp_path / "t.out"
    path.write_bytes(b"".join(_row(n) for n in range(1, LINES + 1)))
    start, end = punch_lines(path, LIMIT // 8, path.stat().st_size - LIMIT // 2)
    data = path.read_bytes()
    assert data[start:end] == b"\0" * (end - start)
    head_lines = data[:start].count(b"\n")
    first_after = int(data[end:].split(b"\n", 1)[0].split()[1])  # the first whole row after the gap
    return ov.Source("stdout", str(path), gap=ov.Gap(start, end, LIMIT)), head_lines, first_after


def test_tail_says_what_was_written_and_kept(holed):
    src, _, _ = holed
    view = ov.tail([src])
    head = view.text.splitlines()[0]
    assert "\0" not in view.text and "\\x00" not in view.text
    assert "written" in head and "kept" in head and "dropped from the middle" in head and "~" in head, head
    assert view.text.rstrip().endswith(f"row {LINES} of the numbered output")
    stream = view.data["streams"]["stdout"]
    assert stream["size"] == os.path.getsize(src.path)
    assert stream["dropped"]["bytes"] == src.gap.end - src.gap.start


def test_grep_across_the_gap_names_the_right_lines(holed):
    src, head_lines, first_after = holed
    view = ov.grep([src], rf"^row (5|{first_after + 10}|{LINES}) ")
    assert "\0" not in view.text
    assert "stdout:5: row 5 " in view.text  # before the gap: exact
    gap_line = head_lines + 1
    # after it: counted from the gap, marked: the 11th row after the marker line
    assert f"stdout:~{gap_line + 11}: row {first_after + 10} " in view.text, view.text
    assert "counted from the gap" in view.text
    again = ov.window([src], gap_line + 11, 1)
    assert f"~{gap_line + 11}: row {first_after + 10} " in again.text  # the number a grep shows reads the line


def test_window_over_the_gap_shows_the_marker_not_nuls(holed):
    src, head_lines, first_after = holed
    view = ov.window([src], head_lines - 1, 4)
    lines = view.text.splitlines()[1:]
    assert lines[0] == f"{head_lines - 1}: row {head_lines - 1} of the numbered output"
    assert lines[1] == f"{head_lines}: row {head_lines} of the numbered output"
    assert "dropped from the middle: over --max-output-bytes 1 MiB" in lines[2], lines
    assert lines[3] == f"~{head_lines + 2}: row {first_after} of the numbered output"
    assert "\0" not in view.text


def test_new_only_from_before_the_gap_skips_it_and_moves_the_cursor_past_it(holed):
    src, _, _ = holed
    size = os.path.getsize(src.path)
    first = ov.tail([src], {"stdout": 100}, new_only=True)
    assert "\0" not in first.text and "\\x00" not in first.text
    cursor = first.read_to["stdout"]
    assert 100 < cursor < src.gap.start
    at_gap = ov.tail([src], {"stdout": src.gap.start - 30}, new_only=True, budget=2000)
    assert "dropped from the middle" in at_gap.text
    assert at_gap.read_to["stdout"] > src.gap.end  # the cursor jumps the gap with what it showed
    last = ov.tail([src], {"stdout": size - 200}, new_only=True)
    assert last.read_to["stdout"] == size


def test_wait_for_and_failures_across_the_gap(holed):
    src, head_lines, first_after = holed
    w = ov.watch(src, rf"^row {first_after + 3} ", from_end=False)
    line = w.check(final=True)
    assert line is not None and line.from_gap and line.number == head_lines + 1 + 4
    assert w.offset > src.gap.end
    inside = ov.watch(src, r"^row ", start=src.gap.start + 10)  # a cursor inside the gap: the rows after it
    found = inside.check(final=True)
    assert found is not None and found.text.startswith(f"row {first_after} ")
