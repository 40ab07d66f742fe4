"""What a task waiting for input asks: the unfinished last line of its output (a prompt has no newline yet),
cleaned as every view is and bounded, and the one line every answer and todo says it with."""

from __future__ import annotations

import json
import os

from hivebash.output_views.terminal_text import readable

PROMPT_BYTES = 1024  # how far back from a stream's end its unfinished line is looked for
PROMPT_CHARS = 120  # of the prompt shown; a longer one keeps its end (where the question is)


def prompt_of(paths: list[str]) -> str:
    """The unfinished last line of the stream written last ("" when every stream ends with a newline)."""
    newest: tuple[int, str] | None = None
    for path in paths:
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        if st.st_size and (newest is None or st.st_mtime_ns > newest[0]):
            newest = (st.st_mtime_ns, path)
    if newest is None:
        return ""
    try:
        fd = os.open(newest[1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - PROMPT_BYTES)
        raw = os.pread(fd, size - start, start)  # (the newest bytes: never in a dropped middle)
    finally:
        os.close(fd)
    if raw.endswith(b"\n"):
        return ""
    line = readable(raw).rsplit("\n", 1)[-1].replace("\t", " ")
    return line if len(line) <= PROMPT_CHARS else "…" + line[-(PROMPT_CHARS - 1):]


def asking_line(prompt: str) -> str:
    """`waiting for input: "Continue [y/N]? "` (or that it printed no prompt)."""
    return f"waiting for input: {json.dumps(prompt, ensure_ascii=False)}" if prompt.strip() else \
        "waiting for input (no prompt on its last line)"


def answer_step(task_id: str) -> str:
    """The call that answers it."""
    return f'send(id="{task_id}", text="...") types the answer'
