"""The examples in docs/ are what the daemons print today: scripts/docs-examples --check regenerates every
`<!-- example: NAME -->` block from real daemons and fails with a diff when one differs."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_docs_examples_match_what_the_code_prints():
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "docs_examples.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (
        f"run scripts/docs-examples to update the docs:\n{done.stdout[-6000:]}{done.stderr[-3000:]}")
