"""The five programs share one shape (common.cli_base): -h/--help, --version, an "Exit codes" section in every
--help, --log-level as a choice, one-line errors; knobs take their command-line type from their declared type,
and a knob that cannot work is refused by name."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from common.cli_base import default_url
from common.config import click_type, knob
from common.todos.cli import main as todos_main
from hivebash.cli import daemon_main as bash_daemon_main
from hivebash.cli import main as bash_main
from hivesubagent.cli import daemon_main as subagent_daemon_main
from hivesubagent.cli import main as subagent_main

PROGRAMS = {"hive-bash-daemon": bash_daemon_main, "hive-bash": bash_main, "hive-subagent-daemon": subagent_daemon_main,
            "hive-subagent": subagent_main, "hive-todos": todos_main}
BIN = Path(sys.executable).parent


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_program_has_help_version_and_exit_codes(name):
    program = PROGRAMS[name]
    for flag in ("-h", "--help"):
        shown = CliRunner().invoke(program, [flag], prog_name=name)
        assert shown.exit_code == 0 and f"Usage: {name}" in shown.output and "Exit codes:\n    0 " in shown.output
    version = CliRunner().invoke(program, ["--version"], prog_name=name)
    assert version.exit_code == 0 and version.output.startswith(f"{name}, version ")


@pytest.mark.parametrize("name, sub", [("hive-bash", "run"), ("hive-subagent", "log"), ("hive-todos", "outbox")])
def test_a_subcommand_help_shows_its_programs_exit_codes(name, sub):
    shown = CliRunner().invoke(PROGRAMS[name], [sub, "--help"], prog_name=name)
    assert shown.exit_code == 0 and "Exit codes:\n    0 " in shown.output


def test_run_help_says_options_come_before_the_command():
    shown = CliRunner().invoke(bash_main, ["run", "--help"])
    assert "Options come before CMD" in shown.output


@pytest.mark.slow
@pytest.mark.parametrize("daemon", ["hive-bash-daemon", "hive-subagent-daemon"])
@pytest.mark.parametrize("flag, value, message", [
    ("--log-level", "loud", "'loud' is not one of 'debug', 'info', 'warning', 'error'"),
    ("--max-running", "0", "--max-running: must be at least 1"),
    ("--kill-grace", "-1", "--kill-grace: must be >= 0"),
    ("--connection-limit", "0", "--connection-limit: must be at least 1"),
])
def test_daemons_refuse_a_knob_that_cannot_work_in_one_line(tmp_path, daemon, flag, value, message):
    out = subprocess.run([str(BIN / daemon), "--state-dir", str(tmp_path / "s"), "--port", "0", flag, value],
                         capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert out.returncode == 2 and message in out.stderr.replace("Invalid value for ", "").replace("'--", "--"), (
        out.stderr)
    assert "Traceback" not in out.stderr


def test_a_knob_takes_its_type_from_its_declaration():
    @dataclasses.dataclass(frozen=True)
    class Knobs:
        level: "Literal" = knob("a", "level", "x")  # noqa: F821 - a string annotation no knob may have
        wait: float | None = knob(None, "seconds", "x")
        names: tuple[str, ...] = knob((), "names", "x", multiple=True)
        where: Path = knob(Path("."), "path", "x")

    fields = {f.name: f for f in dataclasses.fields(Knobs)}
    assert click_type(fields["wait"]) is float and click_type(fields["names"]) is str
    assert isinstance(click_type(fields["where"]), click.Path)
    with pytest.raises(TypeError, match="knob level: no command-line type"):
        click_type(fields["level"])


def test_the_client_reads_the_token_file_with_the_daemons_0600_check(tmp_path):
    token = tmp_path / "token"
    token.write_text("secret\n")
    token.chmod(0o644)
    shown = CliRunner().invoke(bash_main, ["--url", "http://127.0.0.1:1/mcp", "--token-file", str(token), "list"])
    assert shown.exit_code == 2 and "chmod 600" in shown.output


def test_the_clients_find_the_daemon_from_the_units_variables(monkeypatch):
    monkeypatch.setenv("HIVE_BASH_PORT", "7799")
    monkeypatch.setenv("HIVE_BASH_HOST", "0.0.0.0")
    assert default_url("HIVE_BASH", 7711) == "http://127.0.0.1:7799/mcp"
    monkeypatch.delenv("HIVE_BASH_PORT")
    monkeypatch.setenv("HIVE_BASH_HOST", "10.1.2.3")
    assert default_url("HIVE_BASH", 7711) == "http://10.1.2.3:7711/mcp"


def test_an_os_error_is_one_line_without_a_traceback(tmp_path):
    from common.todos.outbox import JOURNAL_NAME, OUTBOX_DIRNAME

    (tmp_path / OUTBOX_DIRNAME / "bash" / JOURNAL_NAME).mkdir(parents=True)  # a directory where the journal belongs
    out = subprocess.run([str(BIN / "hive-todos"), "outbox", str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and out.stderr.startswith("Error: ") and len(out.stderr.splitlines()) == 1, out.stderr


def test_a_long_wait_is_announced_on_a_terminal_only():
    import os
    import pty

    argv = [str(BIN / "hive-bash"), "--url", "http://127.0.0.1:1/mcp", "run", "--wait", "5", "true"]
    master, slave = pty.openpty()
    on_tty = subprocess.run(argv, stdout=subprocess.PIPE, stderr=slave, timeout=30)
    os.close(slave)
    said = os.read(master, 4096).decode()
    os.close(master)
    assert on_tty.returncode == 3 and "waiting up to 5 s for the result" in said, said
    piped = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert piped.returncode == 3 and "waiting" not in piped.stderr
