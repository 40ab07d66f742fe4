"""Where a daemon's sessions are: its working directory and the variables that place claude's transcripts
(HOME, CLAUDE_CONFIG_DIR), recorded in its state directory at start. `hive-subagent list` and `log` read the
record, so they look in the daemon's project folder from any directory, with the daemon up or down."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from common.disk.whole_files import replace_whole

RECORD_NAME = "sessions-where.json"
PLACING_VARIABLES = ("HOME", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_PROJECT_DIR_NAME")
DEPLOYED_STATE_DIR = Path("/var/lib/hive-subagent")  # the units' HIVE_SUBAGENT_STATE_DIR
TRY_OUT_STATE_DIR = Path("harness")  # the daemon's default, and scripts/run's


def write_record(state_dir: Path, workdir: Path, env: Mapping[str, str]) -> None:
    """Replace the record atomically; 0600, never through a link."""
    record = {"workdir": str(workdir), "env": {k: env[k] for k in PLACING_VARIABLES if k in env}}
    path = Path(state_dir) / RECORD_NAME
    replace_whole(str(path), json.dumps(record).encode(), str(path.with_name(f".{RECORD_NAME}.{os.getpid()}")))


def read_record(state_dirs: list[Path]) -> tuple[Path, dict[str, str], Path] | None:
    """(workdir, placing variables, record path) from the first state directory holding a readable record."""
    for state_dir in state_dirs:
        path = Path(state_dir) / RECORD_NAME
        try:
            record = json.loads(path.read_text())
            return Path(record["workdir"]), dict(record["env"]), path
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def env_as_daemon(base: Mapping[str, str], placing: Mapping[str, str]) -> dict[str, str]:
    """`base` with the daemon's placing variables: set where it had them, removed where it had not."""
    env = dict(base)
    for name in PLACING_VARIABLES:
        if name in placing:
            env[name] = placing[name]
        else:
            env.pop(name, None)
    return env
