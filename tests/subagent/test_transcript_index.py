"""The incremental transcript index (hivesubagent/transcripts/index.py): summaries read piecemeal equal a whole
parse, however the file grew between looks (a torn last line included), and a file truncated, rewritten in
place, replaced under the same name or archived is read afresh; a foreign transcript is never read whole."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kit.fuzz_budget import examples

from hivesubagent.transcripts import index as transcript_index
from hivesubagent.transcripts import index_file
from hivesubagent.transcripts.index import HEAD_BYTES, TAIL_BYTES, TranscriptIndex
from hivesubagent.transcripts.sessions import SessionStore, archive_file
from hivesubagent.transcripts.transcript import read_transcript


def stamp(i: int) -> str:
    return f"2026-11-30T10:{i // 60 % 60:02d}:{i % 60:02d}Z"


# Entry shapes as claude 2.1.328 writes them (see test_sessions.py), each a function of a counter.
SHAPES = {
    "prompt": lambda i: {"type": "user", "message": {"role": "user", "content": f"prompt {i}"}, "timestamp": stamp(i)},
    "prompt-blocks": lambda i: {"type": "user",
                                "message": {"role": "user", "content": [{"type": "text", "text": f"p{i}"}]}},
    "meta": lambda i: {"type": "user", "isMeta": True, "message": {"role": "user", "content": "meta"},
                       "timestamp": stamp(i)},
    "tool-use": lambda i: {"type": "assistant", "timestamp": stamp(i), "message": {
        "id": f"m{i}", "model": "claude-opus-5-5",
        "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}], "stop_reason": "tool_use"}},
    "tool-result": lambda i: {"type": "user", "toolUseResult": {"stdout": "x" * 50}, "timestamp": stamp(i),
                              "message": {"role": "user",
                                          "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}},
    "answer": lambda i: {"type": "assistant", "timestamp": stamp(i), "message": {
        "id": f"a{i // 2}", "model": f"claude-model-{i % 3}", "content": [{"type": "text", "text": f"answer {i}"}],
        "stop_reason": "end_turn"}},
    "partial-answer": lambda i: {"type": "assistant", "message": {
        "id": f"a{i // 2}", "model": "claude-opus-5-5", "content": [{"type": "text", "text": f"part {i} "}],
        "stop_reason": None}},
    "api-error": lambda i: {"type": "assistant", "isApiErrorMessage": True, "timestamp": stamp(i),
                            "message": {"model": "<synthetic>",
                                        "content": [{"type": "text", "text": "API Error: 500"}]}},
    "interrupt": lambda i: {"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": "[Request interrupted by user]"}]}},
    "interrupt-tool": lambda i: {"type": "user", "toolUseResult": "Error", "message": {"role": "user", "content": [
        {"type": "text", "text": "[Request interrupted by user for tool use]"}]}},
    "title": lambda i: {"type": "custom-title", "customTitle": f"name-{i % 3}"},
    "cost": lambda i: {"type": "cost-state", "totalCostUSD": i / 100},
    "attachment": lambda i: {"type": "attachment", "attachment": {"type": "date"}, "timestamp": stamp(i)},
    "torn": lambda i: '{"type": "user", "message": ',  # a broken line in the middle (claude crashed mid-write)
    # Compact JSON, as claude itself writes it.
    "compact-prompt": lambda i: json.dumps({"type": "user", "message": {"role": "user", "content": f"c{i}"},
                                            "timestamp": stamp(i)}, separators=(",", ":")),
    # claude's bookkeeping, with user and assistant messages nested inside (a Task tool's progress, an API
    # request record): matched by their bytes, they must still count for nothing.
    "progress": lambda i: {"type": "progress", "timestamp": stamp(i), "data": {"message": {
        "type": "assistant",
        "message": {"id": f"sub{i}", "model": "claude-sub", "content": [{"type": "text", "text": "sub"}],
                                         "stop_reason": "end_turn"}}}},
    "nested-user": lambda i: {"type": "progress",
                              "data": {"message": {"type": "user", "message": {"role": "user", "content": "sub"}}}},
    "request-blob": lambda i: {"type": "api-request-blob",
                               "message": {"role": "user", "content": [{"type": "text", "text": "x"}]}},
}


def line(shape: str, i: int) -> bytes:
    entry = SHAPES[shape](i)
    return ((entry if isinstance(entry, str) else json.dumps(entry)) + "\n").encode()


def summary_fields(t) -> dict:
    fields = {k: getattr(t, k) for k in ("name", "session_id", "turns", "model", "cost_usd", "first_at", "last_at")}
    fields["last_turn"] = None if t.last_turn is None else vars(t.last_turn)
    return fields


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shapes=st.lists(st.sampled_from(sorted(SHAPES)), max_size=40), cuts=st.lists(st.integers(0, 4000), max_size=5),
       restarts=st.booleans())
# all but the newline
@example(shapes=["answer", "attachment", "interrupt", "interrupt-tool", "prompt"], cuts=[661], restarts=False)
# the turn's cost starts before it
@example(shapes=["cost", "prompt", "answer", "cost", "title"], cuts=[4000], restarts=True)
def test_piecemeal_summary_equals_a_whole_parse(tmp_path, shapes, cuts, restarts):
    """With `restarts`, the index is saved and loaded into a new one before every look (as a daemon restart
    does): what was saved without the last turn's text, plus that turn read again, equals a whole parse."""
    data = b"".join(line(s, i) for i, s in enumerate(shapes))
    path = tmp_path / "grows" / "s.jsonl"
    whole = tmp_path / "whole" / "s.jsonl"  # the complete lines so far, parsed whole
    for folder in (path.parent, whole.parent):
        folder.mkdir(exist_ok=True)
    path.unlink(missing_ok=True)
    index = TranscriptIndex()
    written = 0
    for cut in sorted({min(c, len(data)) for c in cuts}) + [len(data)]:
        with open(path, "ab") as f:  # appended in pieces, often mid-line: a look must not take a torn line
            f.write(data[written:cut])
        written = cut
        # A last line without its newline is still being written, even when it already parses: left for later.
        whole.write_bytes(data[: data.rfind(b"\n", 0, cut) + 1])
        if restarts:
            index = restarted(index, tmp_path / "index.json")
        assert summary_fields(index.summary(path)) == summary_fields(read_transcript(whole))
    assert index.name(path) == read_transcript(path).name


def restarted(index: TranscriptIndex, saved: Path) -> TranscriptIndex:
    index_file.save(index, saved)
    fresh = TranscriptIndex()
    fresh.adopt(index_file.load(saved))
    return fresh


def write(path: Path, *lines: bytes, mode: str = "ab") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode) as f:
        f.write(b"".join(lines))
    return path


def turn(i: int, name: str | None = "job") -> list[bytes]:
    return [line("prompt", i), line("tool-use", i), line("tool-result", i), line("answer", i),
            *([(json.dumps({"type": "custom-title", "customTitle": name}) + "\n").encode()] if name else []),
            line("cost", i)]


def test_a_line_still_being_written_is_read_once_complete(store):
    path = write(store.project_dir / "s.jsonl", *turn(1))
    whole = line("prompt", 2)
    write(path, whole[:10])  # claude is mid-write
    assert store.read(path).turns == 1
    write(path, whole[10:], line("answer", 3))
    assert store.read(path).turns == 2 and store.read(path).last_turn.result_text == "answer 3"


@pytest.mark.parametrize("how", ["truncated", "rewritten in place", "replaced"])
def test_a_file_no_longer_continued_is_read_afresh(store, how):
    path = write(store.project_dir / "s.jsonl", *turn(1), *turn(2), *turn(3))
    assert (store.read(path).turns, store.title(path)) == (3, "job")
    if how == "truncated":  # shorter than what was read
        write(path, *turn(7, "short"), mode="wb")
    elif how == "rewritten in place":  # same inode, longer than before: only the fingerprint tells
        inode = path.stat().st_ino
        write(path, *turn(8, "other"), *turn(9, "other"), *turn(10, "other"), *turn(11, "other"), mode="r+b")
        assert path.stat().st_ino == inode
    else:  # another file renamed over it (a new inode)
        os.replace(write(path.with_name("new.tmp"), *turn(5, "other"), *turn(6, "other")), path)
    assert summary_fields(store.read(path)) == summary_fields(read_transcript(path))
    assert store.title(path) == read_transcript(path).name


def test_archived_transcripts_are_forgotten_and_their_name_freed(store):
    path = write(store.project_dir / "s.jsonl", *turn(1))
    write(store.project_dir / "other.jsonl", *turn(1, None))
    assert [t.session_id for t in store.list()] == ["s"]  # the unnamed one is not listed
    assert store.index.entries() == 2
    archived = archive_file(path)
    assert store.find("job") is None and store.list() == []
    assert store.index.entries() == 1  # only the unnamed one is still remembered
    assert [t.path for t in store.list(include_archived=True)] == [archived]
    write(path, *turn(4, "again"))  # a new transcript under the old file name
    assert store.find("again").turns == 1


def test_a_foreign_transcript_is_never_read_whole(store, monkeypatch):
    path = write(store.project_dir / "agent.jsonl", *[line for i in range(1000) for line in turn(i, None)])
    assert path.stat().st_size > 4 * (HEAD_BYTES + TAIL_BYTES)
    read = []
    real_pread = os.pread
    monkeypatch.setattr(transcript_index.os, "pread", lambda fd, n, off: read.append(n) or real_pread(fd, n, off))
    assert store.title(path) is None
    assert sum(read) <= HEAD_BYTES + TAIL_BYTES + transcript_index.FINGERPRINT_BYTES
    read.clear()
    version = store.index.version
    grown = line("answer", 9999)
    write(path, grown)
    assert store.title(path) is None
    assert sum(read) <= len(grown) + 2 * transcript_index.FINGERPRINT_BYTES  # what was appended, and the fingerprints
    assert store.index.version == version  # nothing worth saving again (index_file.py)
    read.clear()
    write(path, *turn(10000, "adopted"))  # a title appended later names it
    assert store.title(path) == "adopted"
    assert sum(read) < 2000
    assert store.index.version > version


def test_the_name_is_decided_from_the_tail_or_else_the_head(store):
    filler = [line for i in range(300) for line in turn(i, None)]
    head_named = write(store.project_dir / "h.jsonl", *turn(0, "from-head"), *filler)
    assert store.title(head_named) == "from-head"
    tail_named = write(store.project_dir / "t.jsonl", *turn(0, "old"), *filler, *turn(1, "new"))
    assert store.title(tail_named) == "new"
    # A title only in the middle, beyond both windows, is not seen (transcript_index.py says so).
    middle = write(store.project_dir / "m.jsonl", *filler, *turn(0, "middle"), *filler)
    assert store.title(middle) is None


def test_the_index_survives_a_restart_and_is_checked_before_use(store, tmp_path, caplog):
    kept = write(store.project_dir / "kept.jsonl", *turn(1), *turn(2))
    grown = write(store.project_dir / "grown.jsonl", *turn(1, "grows"))
    replaced = write(store.project_dir / "replaced.jsonl", *turn(1, "old"))
    write(store.project_dir / "foreign.jsonl", *turn(1, None))
    assert {t.name for t in store.list()} == {"job", "grows", "old"}
    state = tmp_path / "state"
    state.mkdir()
    index_file.save(store.index, state / index_file.FILE_NAME)
    assert (state / index_file.FILE_NAME).stat().st_mode & 0o777 == 0o600

    # While the daemon is down: one transcript grows, one is replaced by another file of the same name.
    write(grown, *turn(2, "grows"))
    os.replace(write(replaced.with_name("x.tmp"), *turn(5, "new"), *turn(6, "new")), replaced)
    restarted = SessionStore(store.workdir, store.env)
    restarted.index.adopt(index_file.load(state / index_file.FILE_NAME))
    assert restarted.index.entries() == 4
    for path in (kept, grown, replaced):
        assert summary_fields(restarted.read(path)) == summary_fields(read_transcript(path))
    assert restarted.title(store.project_dir / "foreign.jsonl") is None

    # A file that is not ours to trust is ignored: the index is rebuilt.
    (state / index_file.FILE_NAME).write_text("{not json")
    assert index_file.load(state / index_file.FILE_NAME) == {}
    assert "rebuilding it" in caplog.text
    (state / index_file.FILE_NAME).unlink()
    (state / index_file.FILE_NAME).symlink_to(tmp_path / "elsewhere.json")
    assert index_file.load(state / index_file.FILE_NAME) == {}


def test_a_saved_entry_read_only_to_its_offset_is_read_on_from_there(store, tmp_path, monkeypatch):
    path = write(store.project_dir / "s.jsonl", *[line for i in range(300) for line in turn(i)])
    store.read(path)
    index_file.save(store.index, tmp_path / "index.json")
    write(path, *turn(300))
    restarted = SessionStore(store.workdir, store.env)
    restarted.index.adopt(index_file.load(tmp_path / "index.json"))
    read = []
    real_pread = os.pread
    monkeypatch.setattr(transcript_index.os, "pread", lambda fd, n, off: read.append(n) or real_pread(fd, n, off))
    assert restarted.read(path).turns == 301
    assert sum(read) < 4000  # the appended turn and the fingerprints, not the 300 turns before


def test_a_fifo_in_place_of_a_transcript_is_no_transcript(store):
    path = write(store.project_dir / "s.jsonl", *turn(1))
    assert store.title(path) == "job"
    path.unlink()
    os.mkfifo(path)  # nobody writes to it: opening it for reading must not wait for a writer
    assert store.title(path) is None and store.index.entries() == 0
    with pytest.raises(OSError, match="not a regular file"):
        store.read(path)


def test_the_saved_index_holds_no_text_and_the_result_is_read_again_from_the_transcript(store, tmp_path, caplog):
    result = "RESULT-MARKER-" + "r" * 50000
    answer = {"type": "assistant", "timestamp": stamp(9), "message": {
        "id": "big", "model": "claude-opus-5-5", "content": [{"type": "text", "text": result}],
        "stop_reason": "end_turn"}}
    prompt = {"type": "user", "message": {"role": "user", "content": "PROMPT-MARKER do the thing"},
              "timestamp": stamp(8)}
    path = write(store.project_dir / "s.jsonl", *turn(1), *turn(2), (json.dumps(prompt) + "\n").encode(),
                 (json.dumps(answer) + "\n").encode(), *turn(3)[4:])
    assert store.list()[0].last_turn.result_text == result
    saved = tmp_path / index_file.FILE_NAME
    index_file.save(store.index, saved)
    text = saved.read_text()
    assert "MARKER" not in text and "answer " not in text and "prompt " not in text and saved.stat().st_size < 1000
    again = SessionStore(store.workdir, store.env)
    again.index.adopt(index_file.load(saved))
    index_file.save(again.index, saved)  # saved again before anything was read: still the same starting point
    assert saved.read_text() == text
    again = SessionStore(store.workdir, store.env)
    again.index.adopt(index_file.load(saved))
    found = again.find("job")
    assert found.last_turn.result_text == result and found.last_turn.prompt == "PROMPT-MARKER do the thing"
    assert summary_fields(found) == summary_fields(read_transcript(path))
    # An index of the format before (which held the last turn's text) is ignored, not trusted.
    saved.write_text(json.dumps({"format": 1, "entries": {}}))
    assert index_file.load(saved) == {} and "format 1, not 2" in caplog.text
