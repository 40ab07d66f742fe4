"""The subagent daemon's figures for /metrics: turns by outcome, running turns, their cost and tokens (the
turn table's tally of ended turns, and the running ones read at scrape time); common/metrics has the rest."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from common.metrics import Family, MetricsRegistry, counted, gauge
from common.metrics.shared import DeliveryFigures, daemon_registry

if TYPE_CHECKING:
    from hivesubagent.engine import SubagentEngine

# Every outcome a turn can end with (turns/claude.py `classify`), shown from 0.
OUTCOMES = ("completed", "error", "interrupted", "killed", "timed_out", "budget_exceeded", "max_turns")


def subagent_metrics(engine: SubagentEngine, todos: DeliveryFigures | None) -> MetricsRegistry:
    registry = daemon_registry("hive_subagent", engine.slots, todos)
    registry.collect(lambda: _turn_families(registry, engine))
    return registry


def _turn_families(registry: MetricsRegistry, engine: SubagentEngine) -> Iterable[Family]:
    table = engine.table
    with table.cond:
        running = list(table.running_locked())
        outcomes = dict(table.ended.outcomes)
        cost, tokens = table.ended.cost_usd, dict(table.ended.tokens)
    for turn in running:  # tokens reported so far by a running turn's stream (its cost comes at its end)
        progress = turn.stream.progress.view()
        tokens["input"] = tokens.get("input", 0) + (progress["input_tokens"] or 0)
        tokens["output"] = tokens.get("output", 0) + (progress["output_tokens"] or 0)
    name = registry.name
    yield counted(name("turns_total"), "Turns ended since the daemon started, by outcome.",
                  [((("outcome", kind),), outcomes.get(kind, 0))
                   for kind in (*OUTCOMES, *sorted(set(outcomes) - set(OUTCOMES)))])
    yield gauge(name("turns_running"), "Turns running now.", len(running))
    yield gauge(name("turns_limit"), "Turns allowed to run at once (--max-running).", table.max_running)
    yield counted(name("cost_usd_total"), "US dollars the ended turns cost, as claude reported them.", cost)
    yield counted(name("tokens_total"), "Model tokens of this daemon's turns (running ones so far), by kind: "
                  "input (cache reads and writes included) and output.",
                  [((("kind", kind),), tokens.get(kind, 0)) for kind in ("input", "output")])
