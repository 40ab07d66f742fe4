"""The conformance suite's tasks-extension scenarios (0.2.0-alpha.12, `tasks-*`) against the real bash daemon.

They are written for the reference server's fixture tools (`slow_compute`, `greet`, `failing_job`, ...), which
our daemons do not serve, so each check that calls one fails on it; every other check must pass: the extension
advertised, -32021 without it, -32601 for tasks/list and tasks/result, -32602 for an unknown taskId, the header
rules, and every message of the exchange valid against the suite's schema (`wire-schema-valid`). The rules those
fixture checks assert are checked with our own tools in tests/bash/test_mcp_tasks.py.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.interop

DAEMON = str(Path(sys.executable).parent / "hive-bash-daemon")
# scenario -> the checks that need no fixture tool, which must pass
MUST_PASS = {
    "tasks-capability-negotiation": {"tasks-extension-advertised", "sep-2663-tasks-methods-non-declaring",
                                     "wire-schema-valid"},
    "tasks-dispatch-and-envelope": {"sep-2663-tasks-result-removed-method-not-found", "tasks-removed-tasks-list",
                                    "sep-2663-tasks-get-invalid-task-id-32602", "wire-schema-valid"},
    "tasks-request-headers": {"tasks-headers-reject-mismatched-method", "wire-schema-valid"},
    "tasks-lifecycle": {"wire-schema-valid"},
}
# What a check that needs a fixture says when it fails: the tool is unknown, or the step before it made no task.
FIXTURE = re.compile(r"Unknown tool: (slow_compute|greet|failing_job|protocol_error_job|confirm_delete)|"
                     r"no task was created by the preceding step|fixture from Check \d+ unavailable")


@pytest.mark.parametrize("scenario", sorted(MUST_PASS))
def test_tasks_scenario(daemon_factory, conformance_bin, node_env, tmp_path, scenario):
    daemon = daemon_factory([DAEMON, "--state-dir", str(tmp_path / "state")])
    out = tmp_path / "out"
    # --force: an extension's scenarios are off the spec timeline, so the suite runs them only when told to.
    proc = subprocess.run([str(conformance_bin), "server", "--url", daemon.url, "--scenario", scenario,
                           "--spec-version", "2026-07-28", "--force", "--timeout", "30000", "-o", str(out)],
                          capture_output=True, text=True, timeout=120, env=node_env, stdin=subprocess.DEVNULL)
    runs = list(out.glob("*/checks.json"))
    assert len(runs) == 1 and proc.returncode in (0, 1), f"rc {proc.returncode}:\n{proc.stdout[-3000:]}"
    checks = json.loads(runs[0].read_text())
    passed = {c["id"] for c in checks if c["status"] == "SUCCESS"}
    assert MUST_PASS[scenario] <= passed, f"{scenario}: not passed: {MUST_PASS[scenario] - passed}\n{checks}"
    other = {c["id"]: c.get("errorMessage") or "" for c in checks if c["status"] in ("FAILURE", "WARNING")}
    assert all(FIXTURE.search(why) for why in other.values()), f"{scenario}: a failure not due to a fixture: {other}"
