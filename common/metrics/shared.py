"""The figures both daemons have alike, read at scrape time: inline waits (the daemon's `WaitSlots`) and todo
deliveries (its `TodoDelivery`). Each is read through the few attributes named here, so this room depends on
neither."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from common.metrics.families import Family, counted, gauge
from common.metrics.registry import MetricsRegistry


class SlotFigures(Protocol):
    limit: int
    refused: int

    @property
    def in_use(self) -> int: ...


class DeliveryFigures(Protocol):
    def status(self) -> dict[str, Any]: ...


def daemon_registry(namespace: str, slots: SlotFigures, todos: DeliveryFigures | None) -> MetricsRegistry:
    """A daemon's registry, collecting its inline waits and its todo deliveries already."""
    registry = MetricsRegistry(namespace)
    name = registry.name

    def collect() -> Iterable[Family]:
        yield gauge(name("inline_waits_held"), "Inline waits holding a wait slot now.", slots.in_use)
        yield gauge(name("inline_waits_limit"), "Inline waits allowed at once (--max-inline-waits).", slots.limit)
        yield counted(name("inline_waits_refused_total"),
                       "Waits answered at once because every wait slot was taken.", slots.refused)
        if todos is None:
            return
        status = todos.status()
        yield counted(name("todo_deliveries_total"), "Todo requests the harness accepted.", status["delivered"])
        yield counted(name("todo_delivery_failures_total"),
                       "Todo requests not delivered (harness down, no reply, or refused); each is retried.",
                       status["failures"])
        yield gauge(name("todos_pending"), "Todos waiting in the outbox for the harness.", status["pending"])

    registry.collect(collect)
    return registry

