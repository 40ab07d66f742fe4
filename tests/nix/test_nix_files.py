"""Every .nix file parses, and nix/package.nix builds the project setup.cfg describes."""

import configparser
import re

import pytest

from nixtest import HERE, REPO, eval_json, run_nix

NIX_FILES = sorted(p.relative_to(REPO) for d in ("nix", "tests/nix") for p in (REPO / d).rglob("*.nix"))


def test_the_nix_files_are_all_found():
    names = {str(p) for p in NIX_FILES}
    assert {"nix/package.nix", "nix/agent-modules/mcp.nix", "nix/systemd/units.nix", "nix/systemd/render.nix"} <= names


@pytest.mark.parametrize("path", NIX_FILES, ids=str)
def test_parses(nix_instantiate, path):
    run_nix(nix_instantiate, "--parse", str(path))


def test_package_matches_setup_cfg(nix_instantiate, tmp_path):
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    requires = [line for line in cfg["options"]["install_requires"].splitlines() if line and not line.startswith("#")]
    names = [re.match(r"[A-Za-z0-9_.-]+", line).group(0).lower() for line in requires]

    # Evaluate package.nix with the stand-in lib and a Python set whose packages are just their names; the
    # stub buildPythonApplication returns its arguments, so we read what the package would be built from.
    probe = tmp_path / "probe.nix"
    probe.write_text(
        f"""
        let
          lib = import {HERE / "lib.nix"};
          names = [ "setuptools" "wheel" {" ".join(f'"{n}"' for n in names)} ];
          python3Packages = builtins.listToAttrs (map (n: {{ name = n; value = {{ pname = n; }}; }}) names)
            // {{ buildPythonApplication = args: args; }};
          drv = import {REPO / "nix" / "package.nix"} {{
            inherit lib python3Packages;
            bash = {{ outPath = "/nix/store/00000000000000000000000000000000-bash"; }};
          }};
        in {{
          inherit (drv) pname version makeWrapperArgs pythonImportsCheck;
          dependencies = map (d: d.pname) drv.dependencies;
          buildSystem = map (d: d.pname) drv.build-system;
        }}
        """
    )
    package = eval_json(nix_instantiate, probe)
    assert package["pname"] == cfg["metadata"]["name"]
    assert package["version"] == cfg["metadata"]["version"]
    assert sorted(package["dependencies"]) == sorted(names)
    assert package["buildSystem"] == ["setuptools", "wheel"]
    packages = [p for p in cfg["options.packages.find"]["include"].split() if not p.endswith(".*")]
    assert sorted(package["pythonImportsCheck"]) == sorted(packages)
    # bash for `bash -c`, after (not before) whatever PATH the service gives.
    assert package["makeWrapperArgs"] == ["--suffix", "PATH", ":", "/nix/store/00000000000000000000000000000000-bash/bin"]
