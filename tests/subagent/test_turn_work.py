"""turns.work: the files and commands of a transcript's last turn (entries shaped as claude 2.1.328 writes them,
as the real CLI wrote them in test_interop_work.py)."""

from __future__ import annotations

import json
from pathlib import Path

from hivesubagent.answers.texts import work_lines
from hivesubagent.turns.work import FILES_SHOWN, read_turn_work, relative


def prompt(text: str) -> dict:
    return {"type": "user", "message": {"role": "user", "content": text}}


def call(name: str, sidechain: bool = False, **tool_input) -> dict:
    return {"type": "assistant", "isSidechain": sidechain,
            "message": {"role": "assistant", "content": [{"type": "tool_use", "name": name, "input": tool_input}]}}


def result() -> dict:
    return {"type": "user", "toolUseResult": {},
            "message": {"role": "user", "content": [{"type": "tool_result", "content": "ok"}]}}


def write(path: Path, entries: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries) + '{"type": "assist')  # a torn last line too
    return path


def test_the_last_turn_only_at_most_twenty_files_and_the_last_three_commands(tmp_path):
    work = tmp_path / "work"
    entries = [prompt("first"), call("Write", file_path=str(work / "old.py")), result(), prompt("second")]
    for i in range(25):
        entries += [call("Edit" if i % 2 else "Write", file_path=str(work / f"f{i:02d}.py")), result()]
    entries += [call("Write", file_path=str(work / "f00.py")), result()]  # written again: listed once
    entries += [call("Bash", command=f"make step{i}") for i in range(5)]
    entries += [call("NotebookEdit", notebook_path="/elsewhere/n.ipynb"), call("Read", file_path=str(work / "r.py"))]
    entries += [call("Write", sidechain=True, file_path=str(work / "by-a-subagent.py"))]
    found = read_turn_work(write(tmp_path / "t.jsonl", entries), work).as_dict()
    assert found["files_changed"] == 26 and found["files_more"] == 26 - FILES_SHOWN
    assert len(found["files"]) == FILES_SHOWN
    assert found["files"][:2] == ["f00.py", "f01.py"] and "old.py" not in found["files"]
    assert found["commands_run"] == 5 and found["last_commands"] == ["make step2", "make step3", "make step4"]
    lines = work_lines(found)
    assert lines[0].startswith("files changed: 26 (f00.py, f01.py,") and lines[0].endswith("f19.py, and 6 more)")
    assert lines[1] == "commands run: 5; last: `make step2` | `make step3` | `make step4`"


def test_nothing_done_unknown_and_paths_outside(tmp_path):
    empty = read_turn_work(write(tmp_path / "t.jsonl", [prompt("hi")]), tmp_path).as_dict()
    assert work_lines(empty) == ["files changed: none", "commands run: none"]
    assert read_turn_work(tmp_path / "missing.jsonl", tmp_path) is None
    assert work_lines(None)[0].startswith("files changed: unknown")
    assert relative("/a/b/c.py", Path("/a/b")) == "c.py" and relative("/a/bc/d.py", Path("/a/b")) == "/a/bc/d.py"
    assert relative("x/y.py", Path("/a")) == "x/y.py" and relative("/a/../etc/p", Path("/a")) == "/etc/p"
    deep = read_turn_work(write(tmp_path / "d.jsonl",
                                [prompt("p"), call("Write", file_path="/d/" + "x" * 300 + "/end.py")]), tmp_path)
    shown = deep.as_dict()["files"][0]
    assert len(shown) == 120 and shown.startswith("…") and shown.endswith("x/end.py")
