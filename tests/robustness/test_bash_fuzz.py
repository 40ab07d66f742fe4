"""Hypothesis over every bash tool's arguments, through the real daemon (HTTP, transport, schema, engine).

Properties: the answer is never a server error; a refusal is an `isError` result (or a JSON-RPC error) that
names the field; the daemon stays up; and at the end no task is left pending or running, no task process is
alive, and nothing was written outside the state directory — whatever names, ids and paths were tried
(`../x`, `a/b`, `.`, NUL, look-alike letters, 64 characters...).

The commands themselves come from a harmless set (the point is the arguments, not running random shell);
random text still reaches the daemon inside a quoted printf, and as the command itself where it is refused.
"""

import json
import re
from pathlib import Path

import pytest
from daemon_harness import wait_until
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kit.daemons_kit import BashDaemon, task_processes
from kit.fuzz_budget import examples
from kit.robust_kit import assert_well_formed_answer, call_tool_raw, result_text

FUZZ = settings(max_examples=examples(120), deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
FIELD = re.compile(r"\b(cmd|timeout_secs|wait_seconds|name|cwd|id|force|state|limit|arguments|stdin"
                   r"|text|keys|enter|eof|wait_for)\b")
NAME_OK = re.compile(r"[a-z0-9-]{1,63}\.(out|err|json)|\.[a-z0-9-]{1,63}(\.next)?\.json\.tmp")
# The files of a spare (hivebash/disk/spares.py): an 8-hex id with outputs and record temp files but no record. They
# are made after an answer is sent, so they can appear between two listings of a test.
SPARE_FILE = re.compile(r"\.?(?P<id>[0-9a-f]{8})(\.next)?\.(out|err|json\.tmp)")


def task_files(daemon) -> set[Path]:
    """The state directory's task files, without those of spares."""
    folder = daemon.state_dir / "bash-tasks"
    names = {p.name for p in folder.iterdir()}
    return {folder / n for n in names
            if not ((m := SPARE_FILE.fullmatch(n)) and f"{m['id']}.json" not in names)}


# Names and ids that try to step out of the state directory or look like something they are not.
PATH_TRICKS = ["../x", "..", ".", "a/b", "/etc/passwd", "x\x00y", "x\n", "x/../../y", "~root", "$(id)", "`id`",
               "\u0430bc",  # Cyrillic a
               "\uff54\uff41\uff53\uff4b",  # fullwidth "task"
               "ta\u0455k", "A", "a" * 64, "", " ", "a b", "x.out", "x\\y", "%2e%2e", "a" * 63 + "\n"]
names = (st.sampled_from(PATH_TRICKS + ["ok", "fz-1", "a" * 63, "-", "0"])
         | st.from_regex(r"[a-z0-9-]{1,8}", fullmatch=True) | st.text(max_size=70))
json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10)
json_value = st.recursive(
    json_leaf, lambda i: st.lists(i, max_size=3) | st.dictionaries(st.text(max_size=5), i, max_size=3), max_leaves=8)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


safe_cmds = st.sampled_from(["true", ":", "echo fuzz", "exit 3", "echo err >&2", "printf '\\000\\377\\n'",
                             "kill -TERM $$",
                             "sleep 0.05", "exec true"]) | st.text(max_size=40).filter(lambda t: "\x00" not in t).map(
    lambda t: "printf %s " + _quoted(t))
cmds = (safe_cmds | st.sampled_from(["", " ", "\x00", "echo a\x00b", "x" * 65537])
        | json_value.filter(lambda v: not isinstance(v, str)))
small_waits = st.sampled_from([0, 0, 0.01, 0.2, -1, float("nan"), float("inf"), "1", True, None, 10**9])
numbers = st.sampled_from([1, 2, 0, -1, 1.5, 2.0, 10**9, 10**9 + 1, 10**20, True, "5", None, float("nan")]) | json_value
cwds = (st.sampled_from([".", "/", "/nonexistent", "state", "..", "x\x00y", "", "/etc/passwd", "a" * 5000])
        | st.text(max_size=20))

run_args_weird = st.fixed_dictionaries({}, optional={"cmd": cmds, "timeout_secs": numbers, "wait_seconds": small_waits,
                                                     "name": names, "cwd": cwds, "extra": json_value})
status_args_weird = st.fixed_dictionaries({}, optional={"id": names | json_value, "wait_seconds": small_waits,
                                                        "x": json_value})
kill_args_weird = st.fixed_dictionaries({}, optional={"id": names | json_value, "force": st.booleans() | json_value})
valid_names = st.sampled_from(["fz-a", "fz-b", "fz-c", "fz-d"]) | st.from_regex(r"[a-z0-9-]{1,12}", fullmatch=True)
few = st.sampled_from  # (repeated entries weight the draw towards well-formed values)


def mostly(valid, weird):
    """Usually a well-formed value, so the fuzzing gets past the schema into the engine; sometimes a weird one."""
    # (not one_of(valid, valid, valid, weird): hypothesis draws one_of's distinct branches evenly)
    return st.sampled_from(range(10)).flatmap(lambda i: valid if i < 8 else weird)


run_args = mostly(st.fixed_dictionaries({"cmd": mostly(safe_cmds, cmds)}, optional={
    "timeout_secs": mostly(st.integers(1, 5), numbers), "wait_seconds": mostly(few([0, 0.01, 0.5, 5]), small_waits),
    "name": mostly(valid_names, names), "cwd": mostly(few([".", "/", "state"]), cwds),
    "stdin": mostly(few(["null", "pipe", "tty"]), json_value)}), run_args_weird)
send_args = mostly(st.fixed_dictionaries({"id": mostly(valid_names, names | json_value)}, optional={
    "text": mostly(st.text(max_size=50), json_value), "keys": mostly(st.lists(few(["ctrl-c", "ctrl-d", "tab", "up"]),
                                                                                 max_size=3), json_value),
    "enter": st.booleans() | json_value, "eof": st.booleans() | json_value,
    "wait_seconds": mostly(few([0, 0.01]), small_waits), "wait_for": mostly(few(["x", ">>> $"]), json_value)}),
    st.fixed_dictionaries({}, optional={"id": names | json_value, "text": json_value, "keys": json_value}))
status_args = mostly(st.fixed_dictionaries({"id": mostly(valid_names, names | json_value)}, optional={
    "wait_seconds": mostly(few([0, 0.01, 0.3]), small_waits)}), status_args_weird)
kill_args = mostly(st.fixed_dictionaries({"id": mostly(valid_names, names | json_value)}, optional={
    "force": mostly(st.booleans(), json_value)}), kill_args_weird)
list_args = st.fixed_dictionaries({}, optional={
    "state": mostly(few(["pending", "running", "done", "timed_out", "killed", "interrupted"]),
                    json_value | few(["PENDING", ""])),
    "limit": mostly(st.integers(1, 1000), numbers)})
calls = st.one_of(st.tuples(st.just("run"), run_args), st.tuples(st.just("run"), run_args),
                  st.tuples(st.just("status"), status_args), st.tuples(st.just("kill"), kill_args),
                  st.tuples(st.just("send"), send_args),
                  st.tuples(st.just("list"), list_args),
                  st.tuples(st.sampled_from(["run", "status", "send", "kill", "list"]), json_value))


def settled(daemon) -> bool:
    """No task pending or running, and no record write in flight (a task is terminal in memory a moment
    before its record's temp file is renamed into place; a spare's temp files wait for a later task)."""
    return (not daemon.tasks("running") and not daemon.tasks("pending")
            and not any(p.name.endswith(".tmp") for p in task_files(daemon)))


@pytest.fixture(scope="module")
def fuzz_bash(tmp_path_factory):
    """One daemon for all examples; at the end nothing may be left running or written outside its state dir."""
    root = tmp_path_factory.mktemp("bash-fuzz")
    daemon = BashDaemon(root, root / "state", None, ["--kill-grace", "0.5"]).start()
    before = set(root.rglob("*"))
    yield daemon
    wait_until(lambda: settled(daemon), 60, "every fuzzed task to end and be recorded")
    markers = set()
    for path in (daemon.state_dir / "bash-tasks").iterdir():
        assert NAME_OK.fullmatch(path.name), f"a task file with a name outside the rule: {path.name!r}"
    for record in (daemon.state_dir / "bash-tasks").glob("*.json"):
        markers.add(json.loads(record.read_text())["marker"])
    assert daemon.alive(), daemon.daemon.log()[-3000:]
    assert daemon.stop() == 0
    assert not list((daemon.state_dir / "bash-tasks").glob(".*.tmp")), "a clean stop removes the spares"
    assert not task_processes(markers), "a fuzzed task outlived its daemon"
    state = daemon.state_dir
    stray = {p for p in set(root.rglob("*")) - before if state not in p.parents and p != state}
    assert not stray, f"files written outside the state directory: {sorted(map(str, stray))[:20]}"
    log = daemon.daemon.log()
    assert "unexpected error serving" not in log and "failed unexpectedly" not in log, log[-4000:]


@FUZZ
@given(call=calls)
def test_every_tool_answers_any_arguments_by_naming_the_field(fuzz_bash, call):
    tool, arguments = call
    resp = call_tool_raw(fuzz_bash.url, tool, arguments, timeout=90)
    assert_well_formed_answer(resp)
    body = resp.json()
    if "result" in body:
        result = body["result"]
        text = result_text(result)
        event(f"{tool} {'refused' if result['isError'] else 'ok'}: {text[:40]!r}" if result["isError"]
              else f"{tool} ok")
        assert text.strip(), result
        if result["isError"]:
            assert FIELD.search(text), f"{tool}({arguments!r}) refused without naming a field: {text}"
            assert "internal error" not in text and "Traceback" not in text, text
    else:
        assert body["error"]["message"], body
    assert fuzz_bash.alive()


@FUZZ
@given(args=st.fixed_dictionaries({"cmd": safe_cmds}, optional={
    "timeout_secs": st.integers(1, 3), "wait_seconds": few([0, 0.01, 0.3, 2]), "cwd": few([".", "/", "state"]),
    "name": st.from_regex(r"[a-z]{1,2}", fullmatch=True)}))
def test_well_formed_runs_are_accepted_or_refused_for_a_reason(fuzz_bash, args):
    """Valid arguments in every combination (names reused while their task runs): run answers with the task, or
    refuses naming `name` (still in use); a status of the task always works right after."""
    result = fuzz_bash.call_result("run", args)
    text = result_text(result)
    if result["isError"]:
        assert text.startswith("name:") and "still" in text, text
        return
    data = result["structuredContent"]
    event(f"run -> {data['status']}")
    assert data["status"] in ("pending", "running", "done", "timed_out", "killed")
    assert data["stdout"]["path"].startswith(str(fuzz_bash.state_dir / "bash-tasks") + "/")
    assert fuzz_bash.call("status", id=data["id"])["id"] == data["id"]


@pytest.mark.parametrize("trick", PATH_TRICKS)
def test_path_tricks_in_names_and_ids_are_refused_before_any_file(fuzz_bash, trick):
    """A name or id outside [a-z0-9-]{1,63} is refused by every tool, naming the field, and creates nothing."""
    # Earlier examples' tasks may still be ending: their record writes would come and go in the listing.
    wait_until(lambda: settled(fuzz_bash), 60, "the earlier tasks to end and be recorded")
    files = task_files(fuzz_bash)
    result = fuzz_bash.call_result("run", {"cmd": "echo x", "name": trick, "wait_seconds": 0})
    assert result["isError"] and "name" in result_text(result), result
    for tool in ("status", "kill"):
        result = fuzz_bash.call_result(tool, {"id": trick})
        assert result["isError"] and re.search(r"\bid\b", result_text(result)), (tool, result)
    assert task_files(fuzz_bash) == files
    assert not Path(fuzz_bash.state_dir.parent / "x").exists()


def test_a_valid_name_of_63_characters_works(fuzz_bash):
    name = "z" * 63
    assert fuzz_bash.call("run", cmd="echo long", name=name, wait_seconds=20)["status"] == "done"
    assert (fuzz_bash.state_dir / "bash-tasks" / f"{name}.out").read_text() == "long\n"
    assert fuzz_bash.call("status", id=name)["id"] == name
