"""Helpers for the nix/ checks: run nix-instantiate, evaluate a file to Python data, find the real lib.
Imported as kit.nixtest by the tests of tests/nix."""

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "tests" / "nix"  # the .nix files the evaluations read
REAL_LIB_ENV = "HIVE_NIXPKGS_LIB"
# What each daemon serves, as the seeds and the docs fix say (the subagent serves four, `status` included).
BASH_TOOLS = ["run", "status", "send", "kill", "list"]
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


PINS_FILE = REPO / "nix" / "python-pins.json"

# A nixpkgs release as people have it: mcp 1.27.1, no mcp-types, httpx2 or httpcore2, an idna older than
# httpx2 2.16.2 asks for; everything else recent enough (stand-in versions of the right age, not read from one
# release). anyio depends on idna, as in nixpkgs.
TODAY = {
    "setuptools": "80.9.0", "wheel": "0.45.1", "mcp": "1.27.1", "werkzeug": "3.1.3", "waitress": "3.0.2",
    "click": "8.2.1", "jsonschema": "4.25.1", "psutil": "7.1.0", "anyio": "4.11.0", "idna": "3.11",
    "opentelemetry-api": "1.38.0", "pydantic": "2.12.4", "pyjwt": "2.10.1", "python-multipart": "0.0.20",
    "sse-starlette": "3.0.2", "starlette": "0.49.1", "typing-extensions": "4.15.0", "typing-inspection": "0.4.2",
    "uvicorn": "0.38.0", "truststore": "0.10.4", "h11": "0.16.0",
}
DEPENDS_ON = {"anyio": ["idna"], "httpx2": ["anyio", "httpcore2", "idna"], "mcp": ["anyio", "httpx2", "mcp-types"]}
# A later nixpkgs that packages mcp 2.3.x (and so mcp-types and httpx2 with it).
FUTURE = TODAY | {"mcp": "2.3.1", "mcp-types": "2.3.1", "httpx2": "2.16.0", "httpcore2": "2.16.0", "idna": "3.18"}


def eval_package(nix: str, versions: dict[str, str], depends_on: dict[str, list[str]] | None = None):
    """What nix/package.nix builds against a stand-in nixpkgs Python set holding `versions` (name -> version;
    a name left out is a package that nixpkgs lacks), as tests/nix/eval-package.nix reports it."""
    as_nix_string = lambda value: json.dumps(json.dumps(value))  # noqa: E731 - a JSON string is a Nix string
    return eval_json(nix, HERE / "eval-package.nix",
                     versionsJson=as_nix_string(versions), dependsOnJson=as_nix_string(depends_on or {}))
