"""What a turn did, read from claude's transcript: the files it wrote or edited and the commands it ran.

Every outcome shows it (the status answer, the todo), so the agent sees the work without reading the raw
transcript. It counts the calls claude made (`Write`, `Edit`, `MultiEdit`, `NotebookEdit`, `Bash`), from the
turn's prompt on; sub-agents' own lines (`isSidechain`) are not the turn's. Only the lines that can matter are
parsed: user lines that are not tool results (a prompt starts the turn again) and assistant lines with a
`tool_use` block.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.humanize import one_line, tail
from hivesubagent.answers.shapes import WorkData
from hivesubagent.transcripts.transcript import is_prompt

# The built-in tools that write a file, and the input field naming it.
WRITING_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
FILES_SHOWN = 20
COMMANDS_SHOWN = 3
COMMAND_CHARS = 200
PATH_CHARS = 120  # a path shown is cut from the left ("…/deep/name.py"): 20 of them stay well inside an answer


@dataclass
class TurnWork:
    files: list[str] = field(default_factory=list)  # in the order first written, each once
    commands: list[str] = field(default_factory=list)

    def as_dict(self) -> WorkData:
        return {"files_changed": len(self.files), "files": [tail(f, PATH_CHARS) for f in self.files[:FILES_SHOWN]],
                "files_more": max(0, len(self.files) - FILES_SHOWN), "commands_run": len(self.commands),
                "last_commands": [one_line(c, COMMAND_CHARS) for c in self.commands[-COMMANDS_SHOWN:]]}


def read_turn_work(path: Path, workdir: Path, start: int = 0) -> TurnWork | None:
    """The last turn's work in the transcript at `path`, read from byte `start` (where the turn's prompt is, or
    before it); None when the transcript cannot be read."""
    work = TurnWork()
    try:
        with open(path, "rb") as f:
            f.seek(start)
            for raw in f:  # a line at a time: a turn's tool results can make its transcript many MiB
                entry = _wanted(raw)
                if entry is None or entry.get("isSidechain"):
                    continue
                if entry.get("type") == "user":
                    if is_prompt(entry):
                        work = TurnWork()  # a later turn's prompt: only the last turn counts
                    continue
                for block in (entry.get("message") or {}).get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        _count(work, str(block.get("name")), block.get("input"), workdir)
    except OSError:
        return None
    return work


def turn_work_data(path: Path, workdir: Path, start: int = 0) -> WorkData | None:
    """read_turn_work as the answers show it."""
    found = read_turn_work(path, workdir, start)
    return None if found is None else found.as_dict()


def _wanted(raw: bytes) -> dict | None:
    if b'"tool_use"' not in raw and not (b'"user"' in raw and b'"toolUseResult"' not in raw):
        return None
    try:
        entry = json.loads(raw)
    except ValueError:
        return None  # a torn last line while claude writes
    return entry if isinstance(entry, dict) and entry.get("type") in ("user", "assistant") else None


def _count(work: TurnWork, tool: str, tool_input: Any, workdir: Path) -> None:
    if not isinstance(tool_input, dict):
        return
    if tool == "Bash" and isinstance(tool_input.get("command"), str):
        work.commands.append(tool_input["command"])
    elif tool in WRITING_TOOLS and isinstance(tool_input.get(WRITING_TOOLS[tool]), str):
        shown = relative(tool_input[WRITING_TOOLS[tool]], workdir)
        if shown not in work.files:
            work.files.append(shown)


def relative(path: str, workdir: Path) -> str:
    """`path` relative to the working directory when it is inside it; else as given."""
    absolute = os.path.normpath(os.path.join(workdir, path))
    inside = os.path.commonpath([absolute, str(workdir)]) == str(workdir)
    return os.path.relpath(absolute, workdir) if inside and absolute != str(workdir) else absolute
