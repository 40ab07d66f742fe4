"""Bad inputs to the real subagent daemon (a subprocess on port 0), driving the subagent engineer's fake claude
(tests/kit/fake_claude.py: the real CLI needs the Messages API mock and ~1 s a turn; here only the
inputs matter, and the fake writes the same transcripts and result lines).

prompt_file must be a regular file: a directory, a FIFO (the daemon must not hang opening it), a symlink to
either, a device or a socket is refused naming the field, before any claude runs. Then hypothesis over every
tool's arguments: never a server error, refusals name the field, no claude left running, nothing written
outside the daemon's own directories.
"""

import errno
import os
import re
import socket
import sys
from pathlib import Path

import psutil
import pytest
from daemon_harness import start_daemon, wait_until
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kit.daemons_kit import BIN, CALL_TIMEOUT
from kit.fuzz_budget import examples
from kit.robust_kit import META, assert_well_formed_answer, call_tool_raw, modern_call, result_text, tool_result

FAKE_CLAUDE = Path(__file__).resolve().parents[1] / "kit" / "fake_claude.py"
FIELD = re.compile(r"\b(name|prompt_file|model|trigger|prompt|force|arguments)\b|^refused:")
FUZZ = settings(max_examples=examples(60), deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


class Subagent:
    def __init__(self, root: Path):
        self.root = root
        self.home, self.work, self.state = root / "home", root / "work", root / "state"
        for d in (self.home, self.work):
            d.mkdir(parents=True, exist_ok=True)
        self.fake_log = root / "fake-claude.log"
        fake = root / "fake-claude"
        fake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_CLAUDE}" "$@"\n')
        fake.chmod(0o755)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTHROPIC_"))}
        env.update(HOME=str(self.home), FAKE_CLAUDE_LOG=str(self.fake_log))
        self.daemon = start_daemon([str(BIN / "hive-subagent-daemon"), "--claude-bin", str(fake), "--workdir",
                                    str(self.work), "--state-dir", str(self.state), "--max-running", "3",
                                    "--kill-grace", "1"], root, env)

    def call(self, tool: str, arguments) -> dict:
        return tool_result(call_tool_raw(self.daemon.url, tool, arguments, timeout=CALL_TIMEOUT))

    def claude_runs(self) -> int:
        return len(self.fake_log.read_text().splitlines()) if self.fake_log.exists() else 0

    def claude_processes(self) -> list[psutil.Process]:
        found = []
        for proc in psutil.Process(self.daemon.proc.pid).children(recursive=True):
            try:
                if proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
            except psutil.NoSuchProcess:
                pass
        return found


@pytest.fixture(scope="module")
def subagent(tmp_path_factory):
    root = tmp_path_factory.mktemp("subagent-robust")
    s = Subagent(root)
    before = set(root.rglob("*"))
    yield s
    wait_until(lambda: not s.claude_processes(), 60, "every claude turn to end")
    assert s.daemon.stop() == 0
    allowed = (s.home, s.work, s.state)
    stray = {p for p in set(root.rglob("*")) - before
             if not any(a == p or a in p.parents for a in allowed) and p != s.fake_log
             and not p.name.startswith("daemon-")}
    assert not stray, f"written outside the daemon's directories: {sorted(map(str, stray))[:20]}"
    log = s.daemon.log()
    assert "unexpected error serving" not in log and "failed unexpectedly" not in log, log[-4000:]


@pytest.fixture(scope="module")
def odd_files(tmp_path_factory):
    """Every kind of non-regular file a prompt_file could name, plus a good one and a symlink to it."""
    d = tmp_path_factory.mktemp("odd")
    (d / "good.md").write_text("You are a robustness test subagent.\n")
    (d / "dir").mkdir()
    os.mkfifo(d / "fifo")
    (d / "link-to-fifo").symlink_to(d / "fifo")
    (d / "link-to-dir").symlink_to(d / "dir")
    (d / "link-to-good").symlink_to(d / "good.md")
    (d / "dangling").symlink_to(d / "absent")
    (d / "loop").symlink_to(d / "loop")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(d / "sock"))
    yield d
    sock.close()


BAD_PROMPT_FILES = {
    "dir": "directory", "fifo": "FIFO", "link-to-fifo": "FIFO", "link-to-dir": "directory",
    "sock": "cannot open",  # open(2) of a Unix socket fails with ENXIO
    "absent": "does not exist", "dangling": "does not exist", "loop": "cannot open", "/dev/null": "character device",
    "good.md/x": "cannot open", "relative.md": "absolute", "": "", "a\x00b": "NUL",
}


@pytest.mark.parametrize("which", sorted(BAD_PROMPT_FILES))
def test_prompt_file_must_be_a_regular_file(subagent, odd_files, which):
    """Refused at once (a FIFO is never waited on), naming prompt_file and what it is; no claude runs."""
    path = which if which.startswith("/") or which in ("relative.md", "", "a\x00b") else str(odd_files / which)
    runs = subagent.claude_runs()
    result = subagent.call("start", {"name": "odd", "prompt_file": path})
    text = result_text(result)
    assert result["isError"] and "prompt_file" in text and BAD_PROMPT_FILES[which] in text, text
    assert subagent.claude_runs() == runs, "no claude may run for a refused start"
    if "fifo" in which:  # nobody holds the FIFO open for reading any more: a non-blocking writer finds no reader
        with pytest.raises(OSError) as exc:
            os.close(os.open(odd_files / "fifo", os.O_WRONLY | os.O_NONBLOCK))
        assert exc.value.errno == errno.ENXIO


def test_symlink_to_a_regular_file_is_fine(subagent, odd_files):
    result = subagent.call("start",
                           {"name": "linked", "prompt_file": str(odd_files / "link-to-good"), "trigger": "hello"})
    assert not result["isError"], result_text(result)
    wait_until(lambda: not subagent.call("status", {"name": "linked"})["structuredContent"].get("running"), 60,
               "the fake claude turn to end", interval=0.1)


# -- hypothesis over every tool's arguments ------------------------------------------------------------------------

TRICK_NAMES = ["../x", ".", "a/b", "x\x00y", "\u0430bc", "A", "a" * 64, "", "x\n", "-rf"]
json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10)
json_value = st.recursive(
    json_leaf, lambda i: st.lists(i, max_size=3) | st.dictionaries(st.text(max_size=5), i, max_size=3), max_leaves=8)
# The fake claude obeys "FAKE:" directives in its prompt (sleeps, grandchildren): keep them out of random text.
texts = st.text(max_size=60).filter(lambda t: "FAKE" not in t)


def _mostly(valid, weird):
    """Usually well-formed (so the fuzzing reaches the engine), sometimes not."""
    # (not one_of(valid, valid, valid, weird): hypothesis draws one_of's distinct branches evenly)
    return st.sampled_from(range(10)).flatmap(lambda i: valid if i < 8 else weird)


names = _mostly(st.sampled_from(["fz-a", "fz-b", "fz-c", "fz-d", "linked"]), st.sampled_from(TRICK_NAMES) | json_value)
models = _mostly(st.sampled_from(["sonnet", "claude-opus-4-5", "sonnet[1m]"]),
                 st.sampled_from(["-x", "--dangerously", "a b", "", "x" * 201]) | texts)


@st.composite
def calls(draw, files: Path):
    prompt_files = st.sampled_from([str(files / "good.md"), str(files / "link-to-good"), str(files / "fifo"),
                                    str(files / "dir"), "relative.md", "/dev/zero"]) | json_value
    tool = draw(st.sampled_from(["start", "start", "continue", "interrupt", "status"]))
    fields = {
        "start": {"name": names, "prompt_file": _mostly(st.just(str(files / "good.md")), prompt_files),
                  "model": models, "trigger": _mostly(texts.filter(str.strip), json_value)},
        "continue": {"name": names, "prompt": _mostly(texts.filter(str.strip), json_value), "model": models},
        "interrupt": {"name": names, "force": _mostly(st.booleans(), json_value)},
        "status": {"name": names},
    }[tool]
    required = {"start": ("name", "prompt_file"), "continue": ("name", "prompt"), "interrupt": ("name",),
                "status": ()}[tool]
    args = {k: draw(v) for k, v in fields.items() if draw(st.integers(0, 9)) < (9 if k in required else 3)}
    if draw(st.integers(0, 9)) == 0:
        args = draw(json_value) if draw(st.booleans()) else {**args, "extra": draw(json_value)}
    return tool, args


@FUZZ
@given(data=st.data())
def test_every_subagent_tool_answers_any_arguments_by_naming_the_field(subagent, odd_files, data):
    tool, args = data.draw(calls(odd_files), label="call")
    resp = call_tool_raw(subagent.daemon.url, tool, args, timeout=CALL_TIMEOUT)
    assert_well_formed_answer(resp)
    body = resp.json()
    if "result" in body:
        result = body["result"]
        text = result_text(result)
        event(f"{tool} {'refused: ' + text[:45] if result['isError'] else 'ok'}")
        assert text.strip(), result
        if result["isError"]:
            assert FIELD.search(text.split("invalid arguments for " + tool + ": ")[-1]), f"{tool}({args!r}): {text}"
            assert "internal error" not in text and "Traceback" not in text, text
    else:
        assert body["error"]["message"]
    assert subagent.daemon.proc.poll() is None, subagent.daemon.log()[-3000:]
    # the fake's turns end by themselves; keep the next examples from all being "max_running" refusals
    wait_until(lambda: len(subagent.claude_processes()) < 3, 60, "a free session slot", interval=0.05)


def test_subagent_daemon_refuses_rebinding_before_any_claude(subagent, odd_files):
    """The shipped subagent daemon sits behind the same guard: a foreign Host or Origin starts nothing."""
    runs = subagent.claude_runs()
    params = {"name": "start",
              "arguments": {"name": "rebind", "prompt_file": str(odd_files / "good.md")}, "_meta": META}
    assert modern_call(subagent.daemon.url, "tools/call", params, {"Host": "127.0.0.1.nip.io"}).status == 421
    assert modern_call(subagent.daemon.url, "tools/call", params,
                       {"Origin": "http://localhost.evil.example"}).status == 403
    assert subagent.claude_runs() == runs
