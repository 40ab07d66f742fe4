"""Every .nix file parses, and nix/package.nix builds the project setup.cfg describes."""

import configparser

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from kit.nixtest import FUTURE, REPO, eval_package, run_nix

NIX_FILES = sorted(p.relative_to(REPO) for d in ("nix", "tests/nix") for p in (REPO / d).rglob("*.nix"))


def test_the_nix_files_are_all_found():
    names = {str(p) for p in NIX_FILES}
    assert {"nix/package.nix", "nix/agent-modules/mcp.nix", "nix/systemd/units.nix", "nix/systemd/render.nix"} <= names


@pytest.mark.parametrize("path", NIX_FILES, ids=str)
def test_parses(nix_instantiate, path):
    run_nix(nix_instantiate, "--parse", str(path))


def test_package_matches_setup_cfg(nix_instantiate):
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    requires = [Requirement(line) for line in cfg["options"]["install_requires"].splitlines()
                if line.strip() and not line.lstrip().startswith("#")]

    # package.nix against a nixpkgs Python set that has every dependency (nothing carried): the stand-in
    # builders return their arguments, so we read what the package would be built from.
    package = eval_package(nix_instantiate, FUTURE)
    assert package["pname"] == cfg["metadata"]["name"]
    assert package["version"] == cfg["metadata"]["version"]
    assert sorted(package["dependencies"]) == sorted(canonicalize_name(r.name) for r in requires)
    # Its version rules are setup.cfg's, so the choice between nixpkgs' packages and the carried ones follows it.
    assert {n: SpecifierSet(rule) for n, rule in package["pythonRequires"].items()} == {
        canonicalize_name(r.name): r.specifier for r in requires}
    assert package["buildSystem"] == ["setuptools", "wheel"]
    packages = [p for p in cfg["options.packages.find"]["include"].split() if not p.endswith(".*")]
    assert sorted(package["pythonImportsCheck"]) == sorted(packages)
    # bash for `bash -c`, after (not before) whatever PATH the service gives.
    assert package["makeWrapperArgs"] == ["--suffix", "PATH", ":",
                                          "/nix/store/00000000000000000000000000000000-bash/bin"]
