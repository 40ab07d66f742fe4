"""The official MCP conformance suite (@modelcontextprotocol/conformance 0.2.0-alpha.12) against our transport.

Only the scenarios that apply to any server (docs/design.md, "MCP clients"): the others call the reference
server's fixture tools, prompts and resources. Each scenario runs at every spec version `conformance list
--server` gives it, and writes `<out>/<run>/checks.json`: a list of checks with status SUCCESS, FAILURE,
WARNING or SKIPPED.

A FAILURE or WARNING fails the test unless its check id is in EXPECTED with the reason. The allowlist is
exact: an expected failure that starts to pass fails the test too, so the list never outlives its reason.
"""

import json
import subprocess

import pytest

pytestmark = pytest.mark.interop

# scenario -> the spec versions it applies to (from `conformance list --server`, 0.2.0-alpha.12).
SCENARIOS = {
    "server-initialize": ["2025-06-18", "2025-11-25"],
    "ping": ["2025-06-18", "2025-11-25"],
    "tools-list": ["2025-06-18", "2025-11-25", "2026-07-28"],
    "dns-rebinding-protection": ["2025-11-25", "2026-07-28"],
    "server-session-lifecycle": ["2025-03-26", "2025-06-18", "2025-11-25"],
    "server-stateless": ["2026-07-28"],
    "http-header-validation": ["2026-07-28"],
    "caching": ["2026-07-28"],
}

_FIXTURE_TOOL = "the scenario needs the reference server's diagnostic tool {}; our daemons serve only their own tools"
_NO_CAPABILITY = ("we serve tools only and declare no {} capability, so {} is -32601 Method not found, as the "
                  "spec says for an undeclared capability; the scenario asks without checking capabilities")

# scenario -> {check id: why it is expected to fail}
EXPECTED: dict[str, dict[str, str]] = {
    "server-stateless": {
        "sep-2575-server-rejects-undeclared-capability": _FIXTURE_TOOL.format("test_missing_capability"),
        "sep-2575-missing-capability-http-400": _FIXTURE_TOOL.format("test_missing_capability"),
        "sep-2575-http-server-no-independent-requests-on-stream": _FIXTURE_TOOL.format("test_streaming_elicitation"),
        "sep-2575-server-no-log-without-loglevel": _FIXTURE_TOOL.format("test_logging_tool"),
    },
    "caching": {
        "sep-2549-prompts-list-caching-hints": _NO_CAPABILITY.format("prompts", "prompts/list"),
        "sep-2549-resources-list-caching-hints": _NO_CAPABILITY.format("resources", "resources/list"),
        "sep-2549-resources-templates-list-caching-hints": _NO_CAPABILITY.format("resources",
                                                                                 "resources/templates/list"),
    },
}


def _run(conformance_bin, node_env, url, scenario, version, out_dir):
    proc = subprocess.run(
        [str(conformance_bin), "server", "--url", url, "--scenario", scenario, "--spec-version", version,
         "--timeout", "30000", "-o", str(out_dir)],
        capture_output=True, text=True, timeout=90, env=node_env, stdin=subprocess.DEVNULL)
    runs = list(out_dir.glob("*/checks.json"))
    assert len(runs) == 1, (f"conformance wrote no checks for {scenario} at {version} (rc {proc.returncode}):\n"
                            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    checks = json.loads(runs[0].read_text())
    assert checks, f"no checks ran for {scenario} at {version}:\n{proc.stdout[-3000:]}"
    # rc 1 means "some check failed"; anything else is the suite itself breaking.
    assert proc.returncode in (0, 1), f"conformance crashed (rc {proc.returncode}):\n{proc.stderr[-3000:]}"
    return checks


@pytest.mark.parametrize("scenario,version", [(s, v) for s, versions in SCENARIOS.items() for v in versions],
                         ids=lambda x: x)
def test_conformance_scenario(echo_daemon, conformance_bin, node_env, tmp_path, scenario, version):
    checks = _run(conformance_bin, node_env, echo_daemon.url, scenario, version, tmp_path / "out")
    expected = EXPECTED.get(scenario, {})
    bad = {c["id"]: f"{c['status']}: {c.get('errorMessage') or c.get('description')}"
           for c in checks if c["status"] in ("FAILURE", "WARNING")}
    unexpected = {k: v for k, v in bad.items() if k not in expected}
    assert not unexpected, (
        f"{scenario} at {version}: unexpected failures:\n" + "\n".join(f"  {k}: {v}" for k, v in unexpected.items()))
    stale = [k for k in expected if k not in bad]
    assert not stale, f"{scenario} at {version}: expected failures did not fail (now passing, or renamed): {stale}"
    assert any(c["status"] == "SUCCESS" for c in checks), f"{scenario} at {version}: nothing succeeded: {checks}"
