"""The wheels nix/package.nix may carry (nix/python-pins.json) are the registry's files and the versions this
project runs: each pinned sha256 is that of the file the package index serves (scripts/setup-env downloads them
into .cache/nix-pins), each pin's dependency rules are those written in the wheel itself, and each version is
the one installed in the test venv, so the pins cannot drift from what the tests exercise."""

import configparser
import hashlib
import importlib.metadata
import json
import zipfile
from email.parser import Parser

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from kit.nixtest import PINS_FILE, REPO

PINS = json.loads(PINS_FILE.read_text())
DOWNLOADS = REPO / ".cache" / "nix-pins"
# Markers are read as nixpkgs' default python3 (3.13) on Linux sees them.
NIXPKGS_PYTHON = {"python_version": "3.13", "python_full_version": "3.13.0", "sys_platform": "linux",
                  "platform_system": "Linux", "os_name": "posix", "implementation_name": "cpython",
                  "platform_python_implementation": "CPython", "platform_machine": "x86_64", "extra": ""}


def downloaded(name: str):
    path = DOWNLOADS / PINS[name]["file"]
    if not path.is_file():
        pytest.fail(f"{path.relative_to(REPO)} is missing: run scripts/setup-env (online once), which downloads "
                    "the wheels nix/python-pins.json pins")
    return path


def wheel_requirements(path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(name -> rule, name -> extras) of the wheel's own Requires-Dist that apply on nixpkgs' Python."""
    with zipfile.ZipFile(path) as wheel:
        metadata_name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(wheel.read(metadata_name).decode())
    rules, extras = {}, {}
    for line in metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate(NIXPKGS_PYTHON):
            rules[canonicalize_name(requirement.name)] = str(requirement.specifier)
            if requirement.extras:
                extras[canonicalize_name(requirement.name)] = sorted(requirement.extras)
    return rules, extras


@pytest.mark.parametrize("name", sorted(PINS))
def test_pinned_hash_is_the_registry_file(name):
    path = downloaded(name)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == PINS[name]["sha256"], (
        f"{path.name}: the registry's file differs from nix/python-pins.json's sha256")
    wheel_name, wheel_version, _, tags = parse_wheel_filename(path.name)
    assert (wheel_name, str(wheel_version)) == (name, PINS[name]["version"])
    # Pure Python: the one file serves every platform nixpkgs builds for.
    assert {str(t) for t in tags} == {"py3-none-any"}


@pytest.mark.parametrize("name", sorted(PINS))
def test_pin_is_what_the_test_venv_runs(name):
    assert importlib.metadata.version(name) == PINS[name]["version"]


@pytest.mark.parametrize("name", sorted(PINS))
def test_pinned_rules_are_the_wheels_own(name):
    rules, extras = wheel_requirements(downloaded(name))
    assert PINS[name]["requires"] == rules
    assert PINS[name]["extras"] == extras


def test_every_pin_is_asked_for():
    """mcp is asked by setup.cfg, every other pin by a pin's rules, each at a version the pin satisfies."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    setup_rules = {canonicalize_name(r.name): r.specifier for r in (
        Requirement(line) for line in cfg["options"]["install_requires"].splitlines()
        if line.strip() and not line.lstrip().startswith("#"))}
    for name, pin in PINS.items():
        rules = [setup_rules[name]] if name in setup_rules else []
        rules += [Requirement(f"{name}{p['requires'][name]}").specifier for p in PINS.values() if name in p["requires"]]
        assert rules, f"nix/python-pins.json: nothing asks for {name}"
        assert all(pin["version"] in rule for rule in rules), (name, [str(r) for r in rules])
