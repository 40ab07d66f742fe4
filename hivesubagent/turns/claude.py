"""Driving the `claude` CLI (2.1.328) for one turn: its command line, its environment, its output, its outcome.

Nothing here keeps state across turns; the engine owns the turn, this module knows claude.

Output: `--output-format stream-json --verbose`. Its lines arrive as they happen: `system/init` carries the
session id early, and the last line is the `result` object (outcome, result text, cumulative cost). Plain
`json` would give only the final object, and nothing at all for an interrupted turn.

Why claude's stdout is a pipe read by a thread of ours, not a file: the events are wanted the moment they
happen (the init line answers "is it running, under which session id"; the result line ends the turn), and a
thread blocked in readline() gets them with no polling, where a file would have to be polled. The
reader consumes everything claude writes, so claude never blocks on a full pipe, and it keeps only what the
turn needs (the init facts, the last text, the result object), not the stream. If the daemon dies, claude's
next write fails instead of the turn running on unobserved: the same "a restart stops what is running" the
unit's cgroup gives under systemd. Turn completion never depends on the pipe's EOF (a grandchild that escaped
the group could hold it open): the engine watches the process exit itself and gives the reader a bounded
time to drain. stderr goes to an unlinked temporary file (no pipe to drain, nothing left on disk) and only
its tail is read, for the error message of a turn that failed without a result.

stdin: the prompt is written to an unlinked temporary file and given as stdin, so claude reads it and then
hits EOF (`-p` waits forever for EOF otherwise), and a prompt larger than a pipe buffer cannot block us.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from common.process_seam import Leader, ProcessOps
from common.signals import signal_name
from hivesubagent.places.options import NO_OPTIONS, ClaudeOptions
from hivesubagent.turns.progress import Progress

START_NUDGE = "Carry out your instructions."

# Always on (the seed): no permission prompts a headless run could never answer, and no MCP servers from
# any config file: the subagent gets exactly claude's built-in tools. A safety property, not a knob.
ALWAYS_FLAGS = ("--dangerously-skip-permissions", "--strict-mcp-config")
OUTPUT_FLAGS = ("--output-format", "stream-json", "--verbose")


def start_argv(claude_bin: str, name: str, session_id: str, prompt_file: str, model: str | None,
               budget_usd: float | None = None, max_turns: int | None = None,
               options: ClaudeOptions = NO_OPTIONS) -> list[str]:
    """A fresh session. `--session-id` is ours (a new uuid4), so the id and transcript path are known before
    claude writes a byte; `--name` makes `name` claude's own session title (its custom-title entries)."""
    argv = [claude_bin, "-p", "--name", name, "--session-id", session_id, "--append-system-prompt-file", prompt_file]
    return argv + options.flags() + _turn_flags(model, budget_usd, max_turns)


def continue_argv(claude_bin: str, session_id: str, model: str | None, budget_usd: float | None = None,
                  max_turns: int | None = None, options: ClaudeOptions = NO_OPTIONS) -> list[str]:
    """A new turn of an existing session, resumed by id (a name look-up by claude would depend on its cwd and
    fail on two transcripts with one title; we resolved the name already)."""
    return [claude_bin, "-p", "--resume", session_id] + options.flags() + _turn_flags(model, budget_usd, max_turns)


def _turn_flags(model: str | None, budget_usd: float | None, max_turns: int | None = None) -> list[str]:
    """`--max-budget-usd` caps what this claude process spends (checked after each model call, so the last call
    may pass it; a resumed session's earlier turns do not count against it). `--max-turns N` (hidden from
    claude's --help) caps the model calls of this run: the tools of the Nth call still run, then claude stops
    with result subtype `error_max_turns`, rc 1 (docs/design.md, "The claude CLI")."""
    flags = ["--model", model] if model else []
    if budget_usd is not None:
        flags += ["--max-budget-usd", format_usd(budget_usd)]
    if max_turns is not None:
        flags += ["--max-turns", str(max_turns)]
    return flags + [*ALWAYS_FLAGS, *OUTPUT_FLAGS]


def format_usd(value: float) -> str:
    """A dollar amount as claude's flag takes it: plain decimal, never exponent notation."""
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"


def parse_extra_env(entries: Iterable[str]) -> dict[str, str]:
    """`KEY=VALUE` strings to a dict; raises ValueError naming a bad entry."""
    out: dict[str, str] = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        if not sep or not key or "\0" in entry or not key.replace("_", "a").isalnum():
            raise ValueError(f"extra_env: {entry!r} is not KEY=VALUE (KEY of letters, digits and '_')")
        out[key] = value
    return out


def child_env(base: Mapping[str, str], extra: Mapping[str, str], workdir: Path) -> dict[str, str]:
    """The daemon's environment, the configured extras on top, and PWD matching the working directory."""
    env = dict(base)
    env.update(extra)
    env["PWD"] = str(workdir)
    return env


def spawn(ops: ProcessOps, argv: list[str], cwd: Path, env: Mapping[str, str], prompt: str, state_dir: Path,
          pass_fds: tuple[int, ...] = ()) -> Spawned:
    """Start claude in its own session (process group = its pid) through the process seam, prompt on stdin
    then EOF. Raises OSError if the program cannot be executed (Popen reports exec failures from the child)."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    stdin = tempfile.TemporaryFile(dir=state_dir)
    stderr = tempfile.TemporaryFile(dir=state_dir)
    try:
        stdin.write(prompt.encode("utf-8"))
        stdin.seek(0)
        proc = ops.spawn(argv, cwd=cwd, env=dict(env), stdin=stdin, stdout=subprocess.PIPE, stderr=stderr,
                         pass_fds=pass_fds)
    except BaseException:
        stderr.close()
        raise
    finally:
        stdin.close()
    return Spawned(proc=proc, pgid=proc.pid, stderr=stderr)


@dataclass
class Spawned:
    """One running claude: its leader (a Popen for real), its process group (its own pid: it leads a new
    session), its stderr."""

    proc: Leader
    pgid: int
    stderr: IO[bytes]

    def stderr_tail(self, limit: int = 2000) -> str:
        try:
            size = os.fstat(self.stderr.fileno()).st_size
            self.stderr.seek(max(0, size - limit))
            return self.stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

    def close(self) -> None:
        """Close stderr. stdout belongs to its reader thread, which closes it at EOF."""
        try:
            self.stderr.close()
        except OSError:
            pass


RESULT_KEEP = 64 * 1024  # characters of result text kept in memory; more is never shown


@dataclass
class StreamState:
    """What claude's stream-json output has said so far in one turn."""

    session_id: str | None = None
    model: str | None = None
    init_seen: bool = False
    result: dict[str, Any] | None = None
    result_chars: int = 0  # the whole result text's length (what is kept is cut at RESULT_KEEP)
    last_text: str = ""
    lines: int = 0
    bad_lines: int = 0
    progress: Progress = field(default_factory=Progress)

    def feed(self, raw: bytes) -> str | None:
        """Take one output line; return the event kind worth waking someone for ("init", "assistant", "result")
        or None."""
        raw = raw.strip()
        if not raw:
            return None
        self.lines += 1
        self.progress.touch()
        try:
            event = json.loads(raw)
        except ValueError:
            self.bad_lines += 1  # a non-JSON line (a warning printed to stdout): not ours to judge
            return None
        if not isinstance(event, dict):
            return None
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            self.init_seen = True
            self.session_id = event.get("session_id") or self.session_id
            self.model = event.get("model") or self.model
            return "init"
        if kind == "assistant":
            message = event.get("message") or {}
            text = "".join(b.get("text", "") for b in message.get("content") or []
                           if isinstance(b, dict) and b.get("type") == "text")
            if text:
                self.last_text = text[:RESULT_KEEP]
            self.progress.assistant(message)
            return "assistant"
        if kind == "user":
            self.progress.touch(_tool_results(event))
            return "user"
        if kind == "result":
            self.result_chars = len(event["result"]) if isinstance(event.get("result"), str) else len(self.last_text)
            if isinstance(event.get("result"), str) and len(event["result"]) > RESULT_KEEP:
                event = {**event, "result": event["result"][:RESULT_KEEP]}
            self.result = event
            self.session_id = event.get("session_id") or self.session_id
            return "result"
        return None


def _tool_results(event: dict) -> str | None:
    """What a `user` line of the stream says: the result of a tool call (claude writes one per result)."""
    content = (event.get("message") or {}).get("content")
    if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return "a tool result"
    return None


# The outcome of one turn (TurnEnd.kind): completed, error, interrupted, killed, budget_exceeded, max_turns or
# timed_out. "interrupted" includes a turn that exited without a result (SIGINT mid-turn with stream-json may
# write none; SIGINT in the first second or a crash never does). "budget_exceeded" and "max_turns": claude
# stopped itself at --max-budget-usd or --max-turns (result subtypes error_max_budget_usd, error_max_turns, see
# classify). "timed_out": the daemon stopped it at its time limit (the runner decides).
BUDGET_SUBTYPE = "error_max_budget_usd"
MAX_TURNS_SUBTYPE = "error_max_turns"


@dataclass(frozen=True)
class TurnEnd:
    kind: str
    detail: str
    result_text: str = ""
    exited_without_result: bool = False
    returncode: int | None = None
    cost_usd: float | None = None  # cumulative (claude's total_cost_usd), when the result says
    extra: dict[str, Any] = field(default_factory=dict)


def classify(result: dict | None, returncode: int, sent: Mapping[str, str], stderr_tail: str = "",
             last_text: str = "") -> TurnEnd:
    """Decide a finished turn's outcome from its result object (if any), exit status and the signals we sent.

    `sent` maps signal name ("SIGINT", "SIGKILL") to why we sent it ("interrupt", "turn_timeout", ...)."""
    died_by = signal_name(-returncode) if returncode is not None and returncode < 0 else None
    why = ", ".join(f"{sig} ({reason})" for sig, reason in sent.items())
    if result is not None:
        return _from_result(result, returncode, sent, why, last_text)
    # No result object at all.
    if "SIGKILL" in sent:
        return TurnEnd("killed", f"stopped by {why}; no result", last_text, True, returncode)
    if died_by == "SIGKILL":
        return TurnEnd("killed", "killed by SIGKILL (not sent by this daemon); no result", last_text, True, returncode)
    if sent or died_by:
        cause = f"stopped by {why}" if sent else f"died of {died_by}"
        return TurnEnd("interrupted", f"{cause}; exited without a result", last_text, True, returncode)
    if returncode == 0:
        return TurnEnd("interrupted", "claude exited without a result", last_text, True, returncode)
    detail = f"claude exited with status {returncode} without a result"
    # stderr once: in the detail, never repeated as the result (which is only what the model wrote).
    return TurnEnd("error", detail + (f": {stderr_tail}" if stderr_tail else ""), last_text, True, returncode)


def _from_result(result: dict[str, Any], returncode: int, sent: Mapping[str, str], why: str, last_text: str) -> TurnEnd:
    """classify, for a turn whose stream ended with a result object."""
    text = str(result.get("result") or "")
    cost = result.get("total_cost_usd") if isinstance(result.get("total_cost_usd"), (int, float)) else None
    facts = {k: result.get(k) for k in ("subtype", "terminal_reason", "num_turns", "api_error_status")
             if result.get(k) is not None}
    if not result.get("is_error") and result.get("subtype") == "success":
        return TurnEnd("completed", "claude finished the turn", text, returncode=returncode, cost_usd=cost, extra=facts)
    if result.get("subtype") == BUDGET_SUBTYPE:
        # claude 2.1.328: is_error true, rc 1, terminal_reason budget_exhausted, no `result` text (the reply
        # it cut short is the last assistant text), errors ["Reached maximum budget ($X)"].
        said = "; ".join(str(e) for e in result.get("errors") or [] if e) or "reached its maximum budget"
        return TurnEnd("budget_exceeded", f"claude stopped at its budget: {said}", text or last_text,
                       returncode=returncode, cost_usd=cost, extra=facts)
    if result.get("subtype") == MAX_TURNS_SUBTYPE:
        # claude 2.1.328: is_error true, rc 1, terminal_reason max_turns, no `result` text, errors ["Reached
        # maximum number of turns (N)"]; the last call's tools ran, the next call was not made.
        said = "; ".join(str(e) for e in result.get("errors") or [] if e) or "reached its maximum number of turns"
        return TurnEnd("max_turns", f"claude stopped at its turn limit: {said}", text or last_text,
                       returncode=returncode, cost_usd=cost, extra=facts)
    if "SIGKILL" in sent:
        return TurnEnd("killed", f"stopped by {why}", text, returncode=returncode, cost_usd=cost, extra=facts)
    if sent and (result.get("subtype") == "error_during_execution"
                 or str(result.get("terminal_reason", "")).startswith("abort")):
        return TurnEnd("interrupted", f"stopped by {why}", text or last_text, returncode=returncode,
                       cost_usd=cost, extra=facts)
    status = result.get("api_error_status")
    detail = f"API error {status}" if status else f"claude reported an error ({result.get('subtype')})"
    return TurnEnd("error", detail, text, returncode=returncode, cost_usd=cost, extra=facts)
