"""Rewrite the examples in docs/ from what the daemons print: every block between
`<!-- example: NAME -->` and `<!-- /example -->` in a Markdown file under docs/ (and README.md) is replaced by
the example NAME, produced by running the real daemons (hive-bash-daemon; hive-subagent-daemon driving
tests/kit/fake_claude.py, a stand-in that writes what claude writes) through the real MCP client and a
socket that records the todo lines they send.

    scripts/docs-examples           rewrite the blocks in place
    scripts/docs-examples --check   change nothing; exit 1 with a diff when a block differs (a test runs this)
    scripts/docs-examples --list    the example names

Each producer module (docs_examples_bash.py, docs_examples_subagent.py) returns {name: text}. What differs
from run to run (durations, CPU, memory figures, pids, session ids, temporary paths, times) is set to one
fixed value per kind by `Normalizer`, so the docs only change when what the code prints does.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
BLOCK = re.compile(r"(<!-- example: (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /example -->)", re.S)
FENCE = "```"


@dataclass
class Normalizer:
    """Substitutions applied in order: literal paths first (longest first), then patterns."""

    paths: dict[str, str] = field(default_factory=dict)
    patterns: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, text: str) -> str:
        for real in sorted(self.paths, key=len, reverse=True):
            text = text.replace(real, self.paths[real])
        for pattern, replacement in self.patterns:
            text = re.sub(pattern, replacement, text)
        return text


class RecordingSocket:
    """A harness socket that answers every line {"ok": true} and keeps the lines exactly as received."""

    def __init__(self, path: Path):
        self.path = path
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        self._server.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with conn, conn.makefile("rwb") as stream:
                for raw in stream:
                    with self._lock:
                        self.lines.append(raw.decode().rstrip("\n"))
                    stream.write(b'{"ok":true}\n')
                    stream.flush()

    def sent(self, predicate: Callable[[dict], bool] = lambda m: True) -> list[str]:
        with self._lock:
            return [line for line in self.lines if predicate(json.loads(line))]

    def close(self) -> None:
        self._server.close()


@contextmanager
def scratch() -> Iterator[Path]:
    """A short temporary directory (a Unix socket path must stay under 108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="hive-docs-", dir="/tmp") as root:
        yield Path(root)


def fenced(text: str, lang: str = "") -> str:
    return f"{FENCE}{lang}\n{text.rstrip(chr(10))}\n{FENCE}\n"


def shown_call(url: str, tool: str, arguments: dict):
    """(the call as the model makes it and the answer's text, as Markdown; the result)."""
    from common.protocol.client import call_tool

    shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in arguments.items())
    result = call_tool(url, tool, arguments, operator=False)  # what the model reads, as the agent's call
    return f"`{tool}({shown})` answers{' (an error)' if result.is_error else ''}:\n\n" + fenced(result.text), result


def wait_until(predicate: Callable, what: str, seconds: float = 30.0):
    """Poll `predicate` (another process's state) until it is truthy; give up with `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise SystemExit(f"docs-examples: gave up waiting for {what}")
        time.sleep(0.05)
    return value


def generate() -> dict[str, str]:
    import docs_examples_bash
    import docs_examples_cli
    import docs_examples_subagent

    examples: dict[str, str] = {}
    for producer in (docs_examples_bash, docs_examples_subagent, docs_examples_cli):
        examples.update(producer.examples())
    return examples


def rewrite(text: str, examples: dict[str, str], where: str) -> str:
    def replace(m: re.Match) -> str:
        name = m["name"]
        if name not in examples:
            raise SystemExit(f"docs-examples: {where}: no example named {name!r} (--list shows them)")
        return m.group(1) + examples[name] + m.group(4)

    return BLOCK.sub(replace, text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 and show a diff on drift")
    parser.add_argument("--list", action="store_true", help="print the example names")
    args = parser.parse_args()
    examples = generate()
    if args.list:
        print("\n".join(sorted(examples)))
        return 0
    drifted = []
    for path in DOCS:
        old = path.read_text()
        new = rewrite(old, examples, str(path.relative_to(REPO)))
        if new == old:
            continue
        drifted.append(path)
        if args.check:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                       f"a/{path.relative_to(REPO)}", f"b/{path.relative_to(REPO)}"))
        else:
            path.write_text(new)
    names = ", ".join(str(p.relative_to(REPO)) for p in drifted)
    if args.check and drifted:
        print(f"docs-examples: {names} differ from what the code prints; run scripts/docs-examples", file=sys.stderr)
        return 1
    if drifted:
        print(f"docs-examples: rewrote {names}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
