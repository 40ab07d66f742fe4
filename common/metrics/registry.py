"""A daemon's metrics: its instruments and the collectors that read its state at scrape time, under one
namespace (`hive_bash`, `hive_subagent`), written out whole by `text()`.

A collector that fails is logged and left out of that scrape (with `<namespace>_scrape_errors_total`
counting it): one broken figure must not hide the others."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence

from common.metrics.exposition import render
from common.metrics.families import Counter, Family, Histogram, gauge

log = logging.getLogger(__name__)

Collector = Callable[[], Iterable[Family]]


class MetricsRegistry:
    def __init__(self, namespace: str, clock: Callable[[], float] = time.monotonic):
        self.namespace = namespace
        self._clock = clock
        self._started = clock()
        self._started_wall = time.time()
        self._instruments: list[Counter | Histogram] = []
        self._collectors: list[Collector] = []
        self.scrape_errors = self.counter("scrape_errors_total",
                                          "Collectors that failed during a scrape (the daemon's log says why).")

    def name(self, suffix: str) -> str:
        return f"{self.namespace}_{suffix}"

    def counter(self, suffix: str, help: str, labelnames: Sequence[str] = ()) -> Counter:
        counter = Counter(self.name(suffix), help, labelnames)
        self._instruments.append(counter)
        return counter

    def histogram(self, suffix: str, help: str, labelnames: Sequence[str] = (), **kwargs: Sequence[float]
                  ) -> Histogram:
        histogram = Histogram(self.name(suffix), help, labelnames, **kwargs)
        self._instruments.append(histogram)
        return histogram

    def collect(self, collector: Collector) -> None:
        """Read `collector`'s families at every scrape, after the instruments."""
        self._collectors.append(collector)

    def families(self) -> list[Family]:
        found = [gauge(self.name("uptime_seconds"), "Seconds since the daemon started.",
                       self._clock() - self._started),
                 gauge(self.name("start_time_seconds"), "When the daemon started, as a Unix time.",
                       self._started_wall)]
        for collector in self._collectors:
            try:
                found.extend(collector())
            except Exception:
                log.exception("a metrics collector failed; its figures are left out of this scrape")
                self.scrape_errors.inc()
        found.extend(i.family() for i in self._instruments)
        return found

    def text(self) -> str:
        return render(self.families())
