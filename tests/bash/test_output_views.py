"""Output views over real files, up to a 100 MB output: grep, windows of lines, tails and what is new, each
answer bounded; and the terminal-text cleaning every view applies."""

import os
import re

import pytest

from hivebash import output_views as ov
from hivebash.output_views import Source, ViewError, grep, reading, tail, window
from hivebash.output_views.terminal_text import clean, readable

FILLER = b"filler output line with some ordinary text in it, nothing to see here 0123456789\n"
BIG_LINES_PER_UNIT = 1000  # lines 1, 1001, 2001, ... are TICK lines
MARKER_LINE = 5000
BOUND = 8 * 1024


def _unit(first_line: int) -> bytes:
    return f"TICK {first_line}\n".encode() + FILLER * (BIG_LINES_PER_UNIT - 1)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A 100 MB stdout: filler, a TICK line every 1000 lines (numbered right in the first ten thousand), a
    MARKER at lines 4999 (coloured) and 5000; a short stderr."""
    d = tmp_path_factory.mktemp("big")
    out, err = d / "t.out", d / "t.err"
    head = b"".join(_unit(i * BIG_LINES_PER_UNIT + 1) for i in range(10))
    lines = head.split(b"\n")
    lines[MARKER_LINE - 2] = b"\x1b[1;31mMARKER\x1b[0m found here"  # line 4999 (0-based 4998)
    lines[MARKER_LINE - 1] = b"MARKER \xe2\x9c\x93 at five thousand"
    head = b"\n".join(lines)
    unit = _unit(0)
    with open(out, "wb") as f:
        f.write(head)
        written, units = len(head), 10
        chunk = unit * 64
        while written < 100 * 1000 * 1000:
            f.write(chunk)
            written += len(chunk)
            units += 64
    err.write_bytes(b"warning: one\r\n 10%\r 50%\r100%\nerror: two\n")
    return {"sources": [Source("stdout", str(out)), Source("stderr", str(err))], "units": units,
            "size": written, "out": out}


def _bounded(view):
    assert len(view.text.encode()) < BOUND - 1024, len(view.text.encode())  # room for the facts lines
    return view.text


def test_clean_removes_escapes_and_keeps_last_frame():
    assert clean("\x1b[1;31merror\x1b[0m: x\n") == "error: x\n"
    assert clean("\x1b]0;title\x07a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n") == "alink\n"
    assert clean("10%\r50%\r100%\nnext\r\n") == "100%\nnext\n"
    assert clean("done\r\n\rpartial") == "done\npartial"
    assert clean("bell\x07 nul\x00 del\x7f tab\tok") == "bell\\x07 nul\\x00 del\\x7f tab\tok"
    assert readable(b"\xff\xfeok \xe2\x9c\x93") == "\\xff\\xfeok \u2713"


def test_grep_finds_the_marker_with_its_line_number_and_context(big):
    view = grep(big["sources"], "MARKER", context=2)
    text = _bounded(view)
    assert "--- grep 'MARKER' in stdout: 2 matching lines ---" in text
    assert f"stdout:{MARKER_LINE - 1}: MARKER found here" in text  # colour codes gone
    assert f"stdout:{MARKER_LINE}: MARKER \u2713 at five thousand" in text
    assert f"stdout:{MARKER_LINE - 3}- filler" in text and f"stdout:{MARKER_LINE + 2}- filler" in text
    assert f"stdout:{MARKER_LINE + 3}" not in text
    assert "in stderr: 0 matching lines" in text
    assert view.data["streams"]["stdout"]["matches"] == 2


def test_grep_counts_every_match_and_shows_the_first_within_the_bound(big):
    view = grep(big["sources"][:1], r"^TICK \d+$")
    text = _bounded(view)
    total = big["units"]
    shown = view.data["streams"]["stdout"]["shown"]
    assert 10 < shown < total
    assert f"{total} matching lines, first {shown} shown ({total - shown} more" in text
    numbers = [int(m) for m in re.findall(r"^stdout:(\d+): TICK", text, re.M)]
    assert numbers == [1000 * i + 1 for i in range(shown)]
    assert all(f"TICK {n}" in text for n in numbers[:5])  # the number in the text is the line number


def test_grep_stream_regex_and_bad_arguments(big):
    text = _bounded(grep(big["sources"][1:], r"^(warning|error):"))
    assert "stderr:1: warning: one" in text and "stderr:3: error: two" in text
    assert "\u2713" in grep(big["sources"][:1], "\u2713 at").text  # a non-ASCII pattern runs on decoded lines
    with pytest.raises(ViewError, match="grep: not a valid Python regular expression"):
        grep(big["sources"], "(unclosed")
    with pytest.raises(ViewError, match="context: must be an integer from 0 to 10"):
        grep(big["sources"], "x", context=11)


def test_window_reads_around_a_line(big):
    view = window(big["sources"][:1], MARKER_LINE - 2, 5)
    text = _bounded(view)
    total = big["units"] * 1000
    assert text.splitlines()[0] == (f"--- stdout lines {MARKER_LINE - 2:,}-{MARKER_LINE + 2:,} of {total:,} "
                                    f"(more follow: from_line={MARKER_LINE + 3}) ---")
    assert f"{MARKER_LINE}: MARKER \u2713 at five thousand" in text
    far = window(big["sources"][:1], big["units"] * 1000, 3).text
    assert far.splitlines()[0] == f"--- stdout lines {total:,}-{total:,} of {total:,} (the end of the output) ---"
    assert far.endswith(f"{big['units'] * 1000}: {FILLER.decode()}")
    assert "--- stderr: no line 99 (the output has 3 lines; max_lines alone reads the last ones) ---" in window(
        big["sources"][1:], 99, 3).text
    last = window(big["sources"][:1], -2, 2).text  # the last lines, counted from the end
    assert last.splitlines()[0] == f"--- stdout lines {total - 1:,}-{total:,} of {total:,} (the end of the output) ---"
    many = window(big["sources"][:1], 1, 500)
    assert len(many.data["streams"]["stdout"]["lines"]) < 500 and "more follow" in _bounded(many)
    with pytest.raises(ViewError, match="from_line: must be a non-zero integer"):
        window(big["sources"], 0, 5)


def test_tail_and_new_only(big, tmp_path):
    first = tail(big["sources"])
    text = _bounded(first)
    total = big["units"] * 1000
    assert f"--- stdout: {total:,} lines, 99.6MiB; last " in text and "from_line or grep read the rest ---" in text
    assert "--- stderr: 3 lines, 40 bytes ---\nwarning: one\n100%\nerror: two" in text
    assert "10%" not in text
    err_size = len(b"warning: one\r\n 10%\r 50%\r100%\nerror: two\n")
    # Issue 27, trap 4: the tail skipped most of stdout, so the cursor stays: those lines are still new.
    assert first.read_to == {"stdout": 0, "stderr": err_size}
    again = tail(big["sources"], first.read_to, new_only=True)
    assert again.text.startswith("--- stdout: new lines 1-")
    assert "not shown yet: new_only=true again shows the next" in again.text
    assert "--- stderr: nothing new (3 lines, 40 bytes in all) ---" in _bounded(again)
    assert 0 < again.read_to["stdout"] < big["size"] and again.read_to["stderr"] == err_size
    seen_all = tail(big["sources"], {"stdout": big["size"], "stderr": err_size}, new_only=True)
    assert seen_all.text.count("nothing new") == 2
    grown = tmp_path / "g.out"
    grown.write_bytes(b"old\n")
    src = [Source("stdout", str(grown))]
    seen = tail(src).read_to
    with open(grown, "ab") as f:
        f.write(b"new \x1b[32mline\x1b[0m\n")
    assert tail(src, seen, new_only=True).text == (
        "--- stdout: new line 2 (18 bytes new; 2 lines, 22 bytes in all) ---\nnew line\n")


def test_new_only_after_the_file_was_truncated_shows_it_from_its_start(tmp_path):
    """Issue 25, hole 3: a file emptied below the cursor used to answer "nothing new" and skip what followed."""
    path = tmp_path / "t.out"
    path.write_bytes(b"x" * 290 + b"\n")
    src = [Source("stdout", str(path))]
    seen = tail(src).read_to
    path.write_bytes(b"")  # what `: > t.out` does; the task's O_APPEND writes then land at the new end
    emptied = tail(src, seen, new_only=True)
    assert emptied.text == "--- stdout: truncated (was 291 bytes when last shown, now 0); nothing new (empty) ---\n"
    assert emptied.read_to == {"stdout": 0}
    with open(path, "ab") as f:
        f.write(b"written after\n")
    after = tail(src, seen, new_only=True)  # the cursor was never moved: the file is still below it
    assert after.text == ("--- stdout: truncated (was 291 bytes when last shown, now 14); new line 1 (14 bytes new; "
                          "1 line, 14 bytes in all) ---\nwritten after\n")
    assert after.data["streams"]["stdout"]["truncated"] and after.data["streams"]["stdout"]["from_byte"] == 0
    assert tail(src, after.read_to, new_only=True).text.startswith("--- stdout: nothing new (1 line, 14 bytes")



def test_line_numbers_start_again_at_1_after_a_truncation(tmp_path):
    """Each tail keeps the line count at the offset it read to (line_count.py), so the next counts only what
    was added; a file emptied and written again below that offset must be counted from its start."""
    path = tmp_path / "t.out"
    path.write_bytes(b"".join(f"old {i}\n".encode() for i in range(1, 3001)))
    src = [Source("stdout", str(path))]
    assert "(lines 2,341-3,000)" in tail(src).text  # a tail that did not start at 0: its count is kept
    assert window(src, 2990, 1).text.startswith("--- stdout lines 2,990-2,990 of 3,000 ")
    path.write_bytes(b"")  # what `: > t.out` does; the task's O_APPEND writes then land at the new end
    with open(path, "ab") as f:
        f.write(b"".join(f"new {i}\n".encode() for i in range(1, 1201)))
    after = tail(src).text
    assert after.startswith("--- stdout: 1,200 lines, 9.5KiB; last 717 shown (lines 484-1,200);"), after
    assert "\nnew 484\n" in after and "old" not in after
    assert "\n1: new 1\n" in window(src, 1, 2).text and "stdout:1000: new 1000" in grep(src, "^new 1000$").text
    fresh = tail(src, {"stdout": 0}, new_only=True).text
    assert fresh.startswith("--- stdout: new lines 1-756 shown; lines 757-1,200 "), fresh

def test_binary_output_stays_within_the_bound(tmp_path):
    path = tmp_path / "bin.out"
    path.write_bytes(bytes(range(256)) * 400)  # escapes make the text ~4x the bytes
    text = _bounded(tail([Source("stdout", str(path))]))
    assert "\\xff" in text


def test_long_lines_are_searched_in_pieces_and_shown_cut(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "BLOCK", 4096)
    path = tmp_path / "long.out"
    path.write_bytes(b"a" * 10000 + b"NEEDLE" + b"b" * 10000 + b"NEEDLE\nshort NEEDLE\n")
    view = grep([Source("stdout", str(path))], "NEEDLE")
    assert view.data["streams"]["stdout"]["matches"] == 2  # the long line counts once
    assert "stdout:1: aaaa" in view.text and "… (19,612 more bytes)" in view.text
    assert "stdout:2: short NEEDLE" in view.text


def test_watch_sees_only_new_complete_lines(tmp_path):
    path = tmp_path / "w.out"
    path.write_bytes(b"ready before\n")
    w = ov.watch(Source("stdout", str(path)), r"ready")
    assert w.check() is None  # the old line does not count
    with open(path, "ab") as f:
        f.write(b"noise\nready now")
        f.flush()
        assert w.check() is None  # not a whole line yet
        f.write(b" on :8080\nready again\n")
    line = w.check()
    assert (line.stream, line.number, line.text) == ("stdout", 3, "ready now on :8080")
    assert w.check().number == 4 and w.check() is None
    with open(path, "ab") as f:
        f.write(b"ready at the end")
    assert w.check() is None and w.check(final=True).text == "ready at the end"


def test_watch_follows_a_truncated_file_from_its_start(tmp_path):
    """Issue 25, hole 3 for wait_for: a watch past the end of an emptied file saw none of its new lines."""
    path = tmp_path / "w.out"
    path.write_bytes(b"old line\n" * 40)
    w = ov.watch(Source("stdout", str(path)), r"ready")
    assert w.check() is None and w.truncated == 0
    path.write_bytes(b"")
    with open(path, "ab") as f:
        f.write(b"ready after the cut\n")
    line = w.check()
    assert (line.number, line.text) == (1, "ready after the cut") and w.truncated == 1
    assert w.check() is None


def test_line_numbers_stay_exact_with_the_line_index(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "BLOCK", 4096)  # many blocks, so counts leave index points behind
    path = tmp_path / "n.out"
    path.write_bytes(b"".join(f"row {i}\n".encode() for i in range(1, 20001)))
    src = [Source("stdout", str(path))]
    first = (grep(src, "^row 1999[0-9]$").text, window(src, 15000, 2).text)
    assert "stdout:19990: row 19990" in first[0] and "15000: row 15000\n15001: row 15001" in first[1]
    assert len(ov.LineIndex.of(ov.OutputFile(os.open(path, os.O_RDONLY))).points) > 10  # kept for the unchanged file
    assert (grep(src, "^row 1999[0-9]$").text, window(src, 15000, 2).text) == first
    with open(path, "r+b") as f:  # rewritten in place, same size: the index must not be trusted
        f.write(b"new 1\n")
        f.write(b"\n" * 4)
    assert "stdout:19994: row 19990" in grep(src, "^row 19990$").text  # four more lines before it
    assert "15000: row 14996" in window(src, 15000, 1).text


# ----- the tail (output_views.tail_view), on the files a task can leave --------------------------------------


@pytest.mark.slow
def test_tail_of_a_huge_sparse_file_reads_only_the_end(tmp_path):
    path = tmp_path / "big.out"
    with open(path, "wb") as f:
        f.truncate(8 * 1024**3)  # 8 GiB, sparse: costs nothing on disk
        f.seek(0, 2)
        f.write(b"the end\n")
    shown = tail([Source("stdout", str(path))], budget=4096).data["streams"]["stdout"]
    assert shown["text"].endswith("the end\n") and len(shown["text"]) <= 4096
    assert shown["size"] == 8 * 1024**3 + 8 and shown["elided_bytes"] > 8 * 1024**3 - 4096


def test_tail_cuts_at_a_character_boundary(tmp_path):
    path = tmp_path / "u.out"
    path.write_bytes(("é" * 3000).encode())  # 2 bytes each: a cut in the middle of one is one byte off
    shown = tail([Source("stdout", str(path))], budget=4096).data["streams"]["stdout"]
    assert shown["text"] and set(shown["text"]) == {"é"}, shown["text"][:20]
    assert len(shown["text"].encode()) + shown["elided_bytes"] == 6000


def test_tail_of_binary_output_is_safe_clean_text(tmp_path):
    path = tmp_path / "b.out"
    path.write_bytes(b"ok\n\x00\x01\xff\xfe\x1b[31mred\tx\r\n 5%\r100%\n")
    text = tail([Source("stdout", str(path))]).data["streams"]["stdout"]["text"]
    assert text == "ok\n\\x00\\x01\\xff\\xfered\tx\n100%\n"  # escapes gone, the last \r frame kept
    assert path.read_bytes().count(b"\x1b") == 1  # the file keeps the raw bytes


def test_tail_of_a_missing_output_file_is_empty(tmp_path):
    view = tail([Source("stdout", str(tmp_path / "nope"))])
    shown = view.data["streams"]["stdout"]
    assert (shown["text"], shown["size"], shown["elided_bytes"]) == ("", 0, 0) and "empty" in view.text


@pytest.mark.parametrize("context", [1, 3, 7])
def test_grep_context_is_exactly_n_lines_each_side_of_a_lone_match(tmp_path, context):
    """A match far from the file's edges and from any other match: `context` lines before and after it, no
    more and no fewer (an off-by-one either side would show N-1 or N+1)."""
    path = tmp_path / "c.out"
    path.write_text("".join(("HIT here" if i == 50 else f"line {i}") + "\n" for i in range(1, 101)))
    view = grep([Source("stdout", str(path))], "HIT", context=context)
    lines = view.data["streams"]["stdout"]["lines"]
    assert [(line["number"], line["match"]) for line in lines] == [
        (n, n == 50) for n in range(50 - context, 50 + context + 1)]
    assert [line["text"] for line in lines] == [("HIT here" if n == 50 else f"line {n}")
                                                for n in range(50 - context, 50 + context + 1)]
    assert f"stdout:{50 - context - 1}-" not in view.text and f"stdout:{50 + context + 1}-" not in view.text


def test_failure_lines_match_in_any_case_and_name_their_lines(tmp_path):
    path = tmp_path / "t.out"
    rows = [f"compiling unit {n}" for n in range(1, 2001)]
    rows[99], rows[999], rows[1499] = "ERROR: upper", "Build FaIlEd here", "terror is no error? it is: error"
    rows[1799] = "errr, fial, excption: near misses"
    path.write_text("\n".join(rows) + "\n")
    found = ov.failure_lines([ov.Source("stdout", str(path))], {"stdout": path.stat().st_size})
    assert [(x.number, x.text) for x in found] == [(100, "ERROR: upper"), (1000, "Build FaIlEd here"),
                                                   (1500, "terror is no error? it is: error")]


def test_failure_lines_are_found_again_once_the_file_changed(tmp_path):
    path = tmp_path / "t.out"
    path.write_text("ok\nerror: first\nok\n")
    src = ov.Source("stdout", str(path))
    first = ov.failure_lines([src], {"stdout": path.stat().st_size})
    assert [x.text for x in first] == ["error: first"]
    assert [x.text for x in ov.failure_lines([src], {"stdout": path.stat().st_size})] == ["error: first"]
    with open(path, "a") as f:
        f.write("panic: second\nok\n")
    again = ov.failure_lines([src], {"stdout": path.stat().st_size})
    assert [(x.number, x.text) for x in again] == [(2, "error: first"), (4, "panic: second")]
    path.write_text("fine\n")  # emptied and rewritten (a pruned output): nothing of the old lines
    assert ov.failure_lines([src], {"stdout": path.stat().st_size}) == []
