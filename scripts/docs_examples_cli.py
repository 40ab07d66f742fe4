"""The operator's view for docs/: each program's --help as it prints it (click's CliRunner, 100 columns)."""

from __future__ import annotations

from click.testing import CliRunner
from docs_examples import fenced

WIDTH = "100"


def examples() -> dict[str, str]:
    from common.todos.cli import main as todos_main
    from hivebash.cli import main as bash_main
    from hivesubagent.cli import main as subagent_main

    programs = {"hive-bash": (bash_main, []), "hive-bash-run": (bash_main, ["run"]),
                "hive-bash-send": (bash_main, ["send"]), "hive-bash-attach": (bash_main, ["attach"]),
                "hive-subagent": (subagent_main, []), "hive-todos": (todos_main, [])}
    out = {}
    for name, (program, args) in programs.items():
        prog = name.removesuffix(f"-{args[0]}") if args else name
        shown = CliRunner().invoke(program, [*args, "--help"], prog_name=prog, env={"COLUMNS": WIDTH})
        command = " ".join([prog, *args, "--help"])
        out[f"help-{name}"] = f"`{command}` prints:\n\n" + fenced(shown.output)
    return out
