"""SessionStore over claude's transcripts: the slug rule, names (last custom-title wins), archiving that never
overwrites, and progress read back from entries shaped as claude 2.1.328 writes them (seen in the interop
tests: prompts carry promptSource, API errors are synthetic assistant entries with isApiErrorMessage, SIGINT
leaves "[Request interrupted by user]", cost-state carries the cumulative totalCostUSD)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hivesubagent.transcripts.sessions import SessionStore, archive_file, config_dir, java_string_hash, project_slug
from hivesubagent.transcripts.transcript import read_transcript


def test_java_string_hash_matches_javascript():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322  # Java's "hello".hashCode()
    assert java_string_hash("a" * 20) == 1542361408  # values from node, running the same expression
    assert java_string_hash("polygenelubricants") == -2147483648  # wraps to a signed 32-bit int
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # UTF-16 code units, not code points


def test_slug_rule():
    assert project_slug("/tmp/x/cwd") == "-tmp-x-cwd"
    assert project_slug("/home/a.b/c_d é") == "-home-a-b-c-d--"
    long_path = "/" + "x" * 250
    slug = project_slug(long_path)
    assert slug.startswith("-" + "x" * 199 + "-") and len(slug) > 201
    # node: Math.abs(hash("/" + "x".repeat(250))).toString(36) === "v734pd"
    assert slug == "-" + "x" * 199 + "-v734pd"


def test_config_dir():
    assert config_dir({"HOME": "/h"}) == Path("/h/.claude")
    assert config_dir({"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c"}) == Path("/c")


def test_symlinked_workdir_uses_the_real_path(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    store = SessionStore(tmp_path / "link", {"HOME": str(tmp_path)})
    assert store.slug() == project_slug(str(real))


def test_project_dir_name_override_needs_config_dir(tmp_path):
    env = {"HOME": str(tmp_path), "CLAUDE_CODE_PROJECT_DIR_NAME": "fixed-name"}
    assert SessionStore(tmp_path, env).slug() == project_slug(str(tmp_path))
    assert SessionStore(tmp_path, {**env, "CLAUDE_CONFIG_DIR": str(tmp_path / "c")}).slug() == "fixed-name"
    assert SessionStore(tmp_path,
                        {**env, "CLAUDE_CONFIG_DIR": "/c", "CLAUDE_CODE_PROJECT_DIR_NAME": "a/b"}).slug() != "a/b"


# ------------------------------------------------------------------------------------------------ transcripts


def prompt(text, ts):
    return {"type": "user", "message": {"role": "user", "content": text}, "promptSource": "sdk", "timestamp": ts}


def reply(text, ts, model="claude-opus-5-5", mid="m1", stop="end_turn"):
    return {"type": "assistant",
            "message": {"id": mid, "model": model, "role": "assistant", "content": [{"type": "text", "text": text}],
                        "stop_reason": stop}, "timestamp": ts}


def title(name):
    return {"type": "custom-title", "customTitle": name}


def cost(total):
    return {"type": "cost-state", "totalCostUSD": total}


def write(path: Path, entries) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for e in entries:
            f.write((e if isinstance(e, str) else json.dumps(e)) + "\n")
    return path


def test_progress_of_a_completed_session(store):
    path = write(store.project_dir / "s1.jsonl", [
        title("job"), prompt("do it", "2026-11-30T10:00:00Z"),
        {"type": "attachment", "attachment": {"type": "date"}},
        {"type": "assistant",
         "message": {"id": "m1", "model": "claude-opus-5-5",
                     "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}],
                     "stop_reason": "tool_use"}, "timestamp": "2026-11-30T10:00:01Z"},
        {"type": "user",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]},
         "toolUseResult": {}, "timestamp": "2026-11-30T10:00:02Z"},
        reply("all done", "2026-11-30T10:00:04Z", mid="m2"), title("job"), cost(0.5),
        prompt("again", "2026-11-30T11:00:00Z"),
        reply("second", "2026-11-30T11:00:10Z", model="claude-haiku-4-5", mid="m3"), title("job"), cost(0.75),
        '{"type": "torn line',  # claude may be mid-write
    ])
    t = read_transcript(path)
    assert (t.name, t.session_id, t.turns, t.model, t.cost_usd) == ("job", "s1", 2, "claude-haiku-4-5", 0.75)
    last = t.last_turn
    assert (last.outcome, last.result_text, last.prompt) == ("completed", "second", "again")
    assert last.cost_usd == pytest.approx(0.25) and last.duration_seconds == pytest.approx(10.0)


@pytest.mark.parametrize(
    "tail, outcome, text",
    [
        ([{"type": "assistant", "isApiErrorMessage": True,
           "message": {"model": "<synthetic>", "content": [{"type": "text", "text": "API Error: 500"}]}}], "error",
         "API Error: 500"),
        ([{"type": "user",
           "message": {"role": "user", "content": [{"type": "text", "text": "[Request interrupted by user]"}]}}],
         "interrupted", ""),
        ([], "no_result", ""),  # SIGKILL: the prompt and nothing after it
    ],
)
def test_last_turn_outcomes(store, tail, outcome, text):
    path = write(store.project_dir / "s2.jsonl", [title("x"), prompt("p", "2026-11-30T10:00:00Z"), *tail])
    last = read_transcript(path).last_turn
    assert (last.outcome, last.result_text) == (outcome, text)
    assert read_transcript(path).turns == 1  # the interruption marker is not a prompt


def test_find_by_name_last_title_wins_and_newest_file_first(store):
    write(store.project_dir / "a.jsonl", [title("first"), prompt("p", None), title("renamed")])
    write(store.project_dir / "b.jsonl", [title("first")])
    os.utime(store.project_dir / "b.jsonl", (1, 1))
    write(store.project_dir / "c.jsonl", [title("renamed")])
    assert [p.name for p in store.find_all("first")] == ["b.jsonl"]
    assert [p.name for p in store.find_all("renamed")] == ["c.jsonl", "a.jsonl"]
    assert store.find("renamed").session_id == "c"
    assert store.find("nobody") is None


def test_title_found_in_the_head_when_the_tail_has_none(store):
    big = [title("deep")] + [reply("x" * 1000, None, mid=f"m{i}") for i in range(200)]
    path = write(store.project_dir / "big.jsonl", big)
    assert path.stat().st_size > 2 * 64 * 1024  # neither window reaches the other end
    assert store.title(path) == "deep"  # not in the last 64 KiB: the head has it
    write(path, [title("moved")])
    assert store.title(path) == "moved"  # read from what was appended


def test_archive_never_overwrites(store):
    path = write(store.project_dir / "s.jsonl", [title("n"), prompt("v1", None)])
    first = archive_file(path)
    assert first.name == "s.jsonl.archived" and not path.exists()
    write(path, [title("n"), prompt("v2", None)])
    assert [p.name for p in store.archive("n")] == ["s.jsonl.2.archived"]
    assert "v1" in first.read_text() and "v2" in (store.project_dir / "s.jsonl.2.archived").read_text()
    assert store.find_all("n") == [] and store.archive("n") == []
    listed = {t.path.name for t in store.list(include_archived=True)}
    assert listed == {"s.jsonl.archived", "s.jsonl.2.archived"}
    assert all(t.archived for t in store.list(include_archived=True)) and store.list() == []


def test_long_path_prefix_folders_are_searched(tmp_path):
    work = tmp_path / ("w" * 120) / ("v" * 120)
    work.mkdir(parents=True)
    store = SessionStore(work, {"HOME": str(tmp_path / "home")})
    assert len(store.slug()) > 200
    other = store.projects_dir / (store.slug()[:200] + "-otherhash")  # another build hashing differently
    write(other / "o.jsonl", [title("elsewhere")])
    assert store.find("elsewhere").session_id == "o"
    assert store.project_dir not in store.project_dirs()  # not created yet; never invented


def test_live_sessions_ignore_stale_records(store, tmp_path):
    folder = store.config_dir / "sessions"
    folder.mkdir(parents=True)
    (folder / "999999999.json").write_text(json.dumps({"pid": 999999999, "sessionId": "dead", "procStart": "1"}))
    (folder / "garbage.json").write_text("{not json")
    (folder / f"{os.getpid()}.json").write_text(json.dumps({"pid": os.getpid(), "sessionId": "alive", "name": "me"}))
    live = store.live_sessions()
    assert [(s.pid, s.session_id, s.name) for s in live] == [(os.getpid(), "alive", "me")]
