"""nix/package.nix's choice between nixpkgs' mcp and the wheels it carries (nix/python-pins.json), evaluated
both ways against stand-in nixpkgs Python sets (tests/nix/stub-python.nix): a nixpkgs like today's, whose mcp
is 1.27.1 and which has no mcp-types or httpx2, gets ours; a future one with mcp 2.3.x keeps its own."""

import json

import pytest

from kit.nixtest import DEPENDS_ON, FUTURE, PINS_FILE, TODAY, NixError, eval_package

PINS = json.loads(PINS_FILE.read_text())

def single_versions(result) -> dict[str, str]:
    """name -> version over the whole runtime closure, failing on a name met with two versions (a real build's
    conflict check would refuse it)."""
    seen: dict[str, set[str]] = {}
    for entry in result["nameVersions"]:
        name, version = entry.split("==")
        seen.setdefault(name, set()).add(version)
    assert all(len(v) == 1 for v in seen.values()), {n: v for n, v in seen.items() if len(v) > 1}
    return {name: versions.pop() for name, versions in seen.items()}


def test_todays_nixpkgs_gets_the_carried_mcp(nix_instantiate):
    result = eval_package(nix_instantiate, TODAY, DEPENDS_ON)
    assert result["carriedFromPypi"] == sorted(PINS)
    packages = result["packages"]
    for name, pin in PINS.items():
        package = packages[name]
        assert package["fromNixpkgs"] is False, name
        assert package["version"] == pin["version"]
        assert package["src"] == {"pname": pin["file"].split("-")[0], "version": pin["version"],
                                  "sha256": pin["sha256"], "format": "wheel", "dist": "py3", "python": "py3"}
        assert package["pythonImportsCheck"] == [pin["module"]]
        assert sorted(package["dependencies"]) == sorted([*pin["requires"],
                                                          *(["cryptography"] if name == "mcp" else [])])
    # The overlay reaches nixpkgs' own packages too: anyio sees the carried idna, so the closure has one idna.
    versions = single_versions(result)
    assert versions["idna"] == PINS["idna"]["version"]
    assert versions["pydantic"] == TODAY["pydantic"] and packages["pydantic"]["fromNixpkgs"] is True


def test_a_nixpkgs_with_mcp_2_3_keeps_its_own(nix_instantiate):
    result = eval_package(nix_instantiate, FUTURE, DEPENDS_ON)
    assert result["carriedFromPypi"] == []
    versions = single_versions(result)
    assert all(result["packages"][name]["fromNixpkgs"] for name in versions)
    assert {name: versions[name] for name in ("mcp", "mcp-types", "httpx2", "idna")} == {
        "mcp": "2.3.1", "mcp-types": "2.3.1", "httpx2": "2.16.0", "idna": "3.18"}


def test_each_pin_is_taken_on_its_own_rule(nix_instantiate):
    # nixpkgs' idna already satisfies httpx2's idna >= 3.18: the rest is carried, idna is not.
    result = eval_package(nix_instantiate, TODAY | {"idna": "3.18"}, DEPENDS_ON)
    assert result["carriedFromPypi"] == sorted(set(PINS) - {"idna"})
    assert single_versions(result)["idna"] == "3.18"
    # mcp 2.4 is outside setup.cfg's ~= 2.3.0: ours is carried even though nixpkgs' is newer, and with it
    # mcp-types, which mcp 2.3.0 wants == 2.3.0 (nixpkgs' 2.3.1 will not do); nixpkgs' httpx2 2.16.0 will.
    result = eval_package(nix_instantiate, FUTURE | {"mcp": "2.4.0"}, DEPENDS_ON)
    assert result["carriedFromPypi"] == ["mcp", "mcp-types"]
    assert result["packages"]["mcp-types"]["version"] == "2.3.0"
    assert single_versions(result)["httpx2"] == "2.16.0"


@pytest.mark.parametrize("name, version, rule", [
    ("pydantic", "2.10.6", ">=2.12.0"),  # asked by the carried mcp (and mcp-types)
    ("werkzeug", "2.3.8", ">=3.0,<4"),  # asked by setup.cfg
])
def test_a_dependency_too_old_and_not_carried_names_itself(nix_instantiate, name, version, rule):
    with pytest.raises(NixError) as refused:
        eval_package(nix_instantiate, TODAY | {name: version}, DEPENDS_ON)
    assert f"needs {name} {rule}, and this nixpkgs has {name} {version}" in str(refused.value)


def test_a_missing_dependency_names_itself(nix_instantiate):
    lacking = {k: v for k, v in TODAY.items() if k != "truststore"}
    with pytest.raises(NixError) as refused:
        eval_package(nix_instantiate, lacking, DEPENDS_ON)
    assert "needs truststore >=0.10, and this nixpkgs has no truststore" in str(refused.value)
