"""Fixtures for checking nix/: a real `nix-instantiate` (Debian's nix-bin, installed by scripts/ensure-nix) that
parses every .nix file and evaluates the NixOS module with `lib.evalModules`.

nixpkgs' `lib` is on no registry CI reaches, so the module is evaluated against tests/nix/lib.nix, a stand-in
that follows the module system's priority and type rules. Set HIVE_NIXPKGS_LIB to a checkout of nixpkgs'
`lib/` directory (e.g. from github:nix-community/nixpkgs.lib; never commit it) and every module test also
runs against the real lib.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


from kit.nixtest import HERE, REAL_LIB_ENV, REPO, eval_json, real_lib_path


@pytest.fixture(scope="session")
def nix_instantiate() -> str:
    """Path of nix-instantiate, installing it through scripts/ensure-nix when missing (a fresh machine)."""
    found = shutil.which("nix-instantiate")
    if found is None:
        done = subprocess.run([str(REPO / "scripts" / "ensure-nix")], capture_output=True, text=True, timeout=600)
        found = shutil.which("nix-instantiate")
        if done.returncode != 0 or found is None:
            pytest.fail(f"scripts/ensure-nix could not install nix-instantiate:\n{done.stdout}{done.stderr}")
    return found


@pytest.fixture(params=["stand-in lib", "nixpkgs lib"])
def evaluate_module(request, nix_instantiate):
    """evaluate(*extra_modules) -> what tests/nix/eval-module.nix reports for mcp.nix plus those modules
    (each a Nix expression), under the stand-in lib and, when HIVE_NIXPKGS_LIB is set, the real one."""
    if request.param == "stand-in lib":
        lib_expr = "null"
    else:
        path = real_lib_path()
        if path is None:
            pytest.skip(f"set {REAL_LIB_ENV}=/path/to/nixpkgs/lib to evaluate against the real nixpkgs lib too")
        lib_expr = str(path.resolve())

    def evaluate(*extra_modules: str):
        return eval_json(
            nix_instantiate,
            HERE / "eval-module.nix",
            libPath=lib_expr,
            extraModules="[ " + " ".join(f"({m})" for m in extra_modules) + " ]",
        )

    return evaluate
