"""The plain systemd units (nix/systemd/*.service): generated from nix/systemd/units.nix like the NixOS services,
accepted by systemd itself, and their environment understood by the daemons' own option parsing."""

import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from common.config import BashSettings, SubagentSettings, click_options, env_name, knob_fields, settings_from_options
from kit.nixtest import BASH_TOOLS, HERE, REPO, SUBAGENT_TOOLS, eval_json

SYSTEMD = REPO / "nix" / "systemd"
UNITS = {"hive-bash": ("bash", BashSettings, "HIVE_BASH"),
         "hive-subagent": ("subagent", SubagentSettings, "HIVE_SUBAGENT")}
# Set per deployment, so they differ between the plain units and the NixOS services by design.
PER_DEPLOYMENT = {"ExecStart", "User", "WorkingDirectory", "EnvironmentFile", "Environment"}


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """section -> key -> values (a key may repeat, e.g. Environment=); comments and blank lines skipped."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key, []).append(value)
    return sections


def systemd_value(value) -> str:
    return ("yes" if value else "no") if isinstance(value, bool) else str(value)


@pytest.fixture(scope="module")
def rendered(nix_instantiate):
    return eval_json(nix_instantiate, SYSTEMD / "render.nix")


@pytest.fixture(scope="module")
def nixos_services(nix_instantiate):
    return eval_json(nix_instantiate, HERE / "eval-module.nix", libPath="null", extraModules="[ ]")["services"]


def test_committed_units_are_the_rendered_ones(rendered):
    assert sorted(rendered) == ["hive-bash.service", "hive-subagent.service"]
    for name, text in rendered.items():
        committed = (SYSTEMD / name).read_text()
        assert committed == text, f"nix/systemd/{name} is stale: run nix/systemd/regenerate"


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_plain_unit_agrees_with_the_nixos_service(unit, nixos_services):
    plain = parse_unit((SYSTEMD / f"{unit}.service").read_text())
    service = plain["Service"]
    nixos = nixos_services[unit]
    # Every [Service] setting the NixOS module sets is in the plain unit with the same value, and vice versa.
    shared = {k: systemd_value(v) for k, v in nixos["serviceConfig"].items() if k not in PER_DEPLOYMENT}
    assert {k: v[0] for k, v in service.items() if k not in PER_DEPLOYMENT} == shared
    # The plain unit's fixed environment is the part of the NixOS one that does not come from options.
    plain_env = dict(e.split("=", 1) for e in service["Environment"])
    assert plain_env.items() <= nixos["environment"].items()
    assert plain["Unit"].pop("Description") == [nixos["description"]]
    assert {k: v[0] for k, v in plain["Unit"].items()} == {k: systemd_value(v) for k, v in nixos["unitConfig"].items()}
    assert plain["Install"]["WantedBy"] == nixos["wantedBy"]


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_plain_unit_comment_lists_every_tool(unit):
    tools = BASH_TOOLS if unit == "hive-bash" else SUBAGENT_TOOLS
    text = (SYSTEMD / f"{unit}.service").read_text()
    assert f"serves the MCP tools {', '.join(tools)}\n" in text


def test_systemd_analyze_verify_accepts_the_units(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian's systemd package provides it)")
    # ExecStart must name an existing executable: point it at the console scripts beside this interpreter.
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "hive-bash-daemon").exists() and (bin_dir / "hive-subagent-daemon").exists()
    for unit in UNITS:
        text = (SYSTEMD / f"{unit}.service").read_text().replace("/opt/hive-daemons/bin", str(bin_dir))
        (tmp_path / f"{unit}.service").write_text(text)
    done = subprocess.run(
        [analyze, "verify", *sorted(str(p) for p in tmp_path.glob("*.service"))],
        capture_output=True, text=True, timeout=120,
    )
    # verify exits 0 for a setting it merely ignores ("Failed to parse kill mode ..., ignoring"): any word
    # about our files is a failure.
    assert done.returncode == 0, done.stderr
    ours = [line for line in done.stderr.splitlines() if str(tmp_path) in line or "hive-" in line]
    assert ours == []


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_unit_environment_is_what_the_daemon_parses(unit, nixos_services):
    """The environment the NixOS service sets, fed through the daemon's own click options, yields the
    settings we meant: the variable names exist and the values parse (HIVE_SUBAGENT_EXTRA_ENV splits)."""
    _, settings_cls, prefix = UNITS[unit]
    env = nixos_services[unit]["environment"]
    known = {env_name(f, prefix) for f in knob_fields(settings_cls)}
    assert set(env) <= known, set(env) - known

    seen = {}

    @click.command()
    @click_options(settings_cls, prefix)
    def command(**options):
        seen["settings"] = settings_from_options(settings_cls, options)

    done = CliRunner().invoke(command, [], env=env, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    settings = seen["settings"]
    assert settings.state_dir == Path(f"/var/lib/{unit}")
    assert settings.port == (7711 if unit == "hive-bash" else 7712)
    assert settings.kill_grace == float(env[f"{prefix}_KILL_GRACE"])
    if unit == "hive-subagent":
        assert settings.extra_env == ("IS_SANDBOX=1",)
        assert settings.claude_bin == "claude"
        assert settings.max_running == 4
    else:
        assert settings.max_running == 32
    # systemd's stop timeout leaves the daemon its whole kill escalation.
    assert nixos_services[unit]["serviceConfig"]["TimeoutStopSec"] > settings.kill_grace
