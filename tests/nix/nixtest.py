"""Helpers for the nix/ checks: run nix-instantiate, evaluate a file to Python data, find the real lib.
Importable from tests/nix (its conftest puts this folder on sys.path)."""

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
REAL_LIB_ENV = "HIVE_NIXPKGS_LIB"
# What each daemon serves, as the seeds and the docs fix say (the subagent serves four, `status` included).
BASH_TOOLS = ["run", "status", "kill", "list"]
SUBAGENT_TOOLS = ["start", "continue", "interrupt", "status"]


class NixError(Exception):
    """nix-instantiate refused the expression; the message is its stderr."""


def run_nix(nix: str, *args: str) -> str:
    # --readonly-mode: evaluation only, no Nix store database (none exists on a fresh machine, and we build nothing).
    done = subprocess.run(
        [nix, "--readonly-mode", *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    if done.returncode != 0:
        raise NixError(done.stderr.strip())
    return done.stdout


def eval_json(nix: str, file: Path, **args: str):
    """Evaluate `file` (a function of `args`, each a Nix expression) strictly and return it as Python data."""
    argv = ["--eval", "--strict", "--json", str(file)]
    for name, expr in args.items():
        argv += ["--arg", name, expr]
    return json.loads(run_nix(nix, *argv))


def real_lib_path() -> Path | None:
    value = os.environ.get(REAL_LIB_ENV)
    return Path(value) if value else None
