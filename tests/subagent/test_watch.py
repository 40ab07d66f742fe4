"""`hive-subagent top --once` and `hive-subagent log -f` against a real subagent daemon running the fake claude
(tests/kit/fake_claude.py): the running turn is a row of the frame, and the log follows the turn, printing the
steps claude writes after it started (a tool call, the reply) and ending once the turn ends."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from daemon_harness import start_daemon, wait_until
from kit.gate import Gate
from kit.robust_kit import call_tool_raw, tool_result

BIN = Path(sys.executable).parent


def _call(url: str, tool: str, **arguments) -> dict:
    result = tool_result(call_tool_raw(url, tool, arguments, timeout=90))
    assert not result["isError"], result
    return result


def test_top_shows_the_running_turn_and_log_follows_it_to_its_end(tmp_path, fake_claude_bin, fake_env, prompt_file):
    work, state = tmp_path / "work", tmp_path / "state"
    work.mkdir()
    d = start_daemon([str(BIN / "hive-subagent-daemon"), "--claude-bin", fake_claude_bin, "--workdir", str(work),
                      "--state-dir", str(state)], tmp_path, env=fake_env)
    follower = None
    try:
        gate = Gate(tmp_path)
        trigger = f'FAKE:gate={gate.path}\nFAKE:tool=Bash {{"command": "make test"}}\nFAKE:reply=all green'
        _call(d.url, "start", name="held", prompt_file=str(prompt_file), trigger=trigger)
        top = subprocess.run([str(BIN / "hive-subagent"), "--url", d.url, "top", "--once", "--json"],
                             capture_output=True, text=True, timeout=60, env=fake_env)
        assert top.returncode == 0, top.stderr
        frame = json.loads(top.stdout)
        assert frame["running"] == 1 and [t["name"] for t in frame["turns"]] == ["held"]
        row = frame["turns"][0]
        assert row["turn"] == 1 and row["kind"] == "start" and row["steps"] >= 0 and row["pid"] > 0
        assert frame["calls_in_flight"] == {"calls": {}, "oldest_seconds": {}}
        text = subprocess.run([str(BIN / "hive-subagent"), "--url", d.url, "top", "--once"], capture_output=True,
                              text=True, timeout=60, env=fake_env).stdout
        assert "running 1 of 1 session(s)" in text and any(line.startswith("held ") for line in text.splitlines())

        out = tmp_path / "follow.out"
        with open(out, "w") as sink:
            follower = subprocess.Popen([str(BIN / "hive-subagent"), "--url", d.url, "log", "-f", "held",
                                         "--workdir", str(work), "--state-dir", str(state)],
                                        stdout=sink, stderr=subprocess.STDOUT, env=fake_env)
        wait_until(lambda: "=== turn 1" in out.read_text(), 30, "the log's first turn printed")
        assert "-> Bash" not in out.read_text()  # not written yet: the turn waits at its gate
        gate.open()
        assert follower.wait(60) == 0, out.read_text()
        followed = out.read_text()
        lines = followed.splitlines()
        first = [i for i, x in enumerate(lines) if x.startswith(("=== turn 1 ", "-> Bash", "all green"))]
        assert [lines[i][:6] for i in first] == ["=== tu", "-> Bas", "all gr"], followed
        assert followed.rstrip().endswith("(the turn of held is not running: end of the log)")
        assert followed.count("=== turn 1") == 1  # what was shown is not shown again
    finally:
        if follower is not None and follower.poll() is None:
            follower.kill()
        d.stop()
