"""The bash daemon's figures for /metrics, read from the engine at scrape time: tasks by state, ends not yet
saved, the bytes of task output on disk (common/metrics has the registry, the format, the tool calls)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from common.metrics import Family, MetricsRegistry, gauge
from common.metrics.shared import DeliveryFigures, daemon_registry
from hivebash.tasks.states import STATE_ORDER

if TYPE_CHECKING:
    from hivebash.engine import Engine

OUTPUT_SUFFIXES = (".out", ".err")


def bash_metrics(engine: Engine, todos: DeliveryFigures | None) -> MetricsRegistry:
    """The registry of a bash daemon (the transport adds the tool calls)."""
    registry = daemon_registry("hive_bash", engine.slots, todos)
    registry.collect(lambda: _task_families(registry, engine))
    return registry


def _task_families(registry: MetricsRegistry, engine: Engine) -> Iterable[Family]:
    states: Counter[str] = Counter()
    unsaved = 0
    with engine.registry.locked() as tasks:
        for entry in tasks.entries():
            states[entry.task.shown_state] += 1
            unsaved += entry.unsaved is not None
    yield gauge(registry.name("tasks"), "Tasks the daemon keeps, by state (pending and running included).",
                [((("state", state),), states[state]) for state in STATE_ORDER])
    yield gauge(registry.name("records_unsaved"),
                "Ended tasks whose end could not be written to disk yet (a full disk); retried every 30 s.", unsaved)
    yield gauge(registry.name("output_bytes_on_disk"), "Bytes of task output files (stdout and stderr) on disk.",
                output_bytes(engine.store.dir))


def output_bytes(directory: os.PathLike[str] | str) -> int:
    """The sizes of every task output file in `directory`, summed (one directory read, a stat a file)."""
    total = 0
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.endswith(OUTPUT_SUFFIXES):
                    try:
                        total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue  # pruned while we looked
    except OSError:
        return 0
    return total
