"""Metric families: what one scrape shows of a metric (`Family`), and the two instruments a call path moves,
`Counter` and `Histogram`, each guarded by its own lock (an increment is a read and a write: two threads must
not interleave them)."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["counter", "gauge", "histogram"]
Labels = tuple[tuple[str, str], ...]  # (name, value) pairs, in the family's label order

# Seconds: from a status answered at once (~1-2 ms) to an inline wait held to its 30 s cap.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True)
class Sample:
    suffix: str  # "" for the family's own name; "_bucket", "_sum", "_count" for a histogram's series
    labels: Labels
    value: float


@dataclass
class Family:
    """One metric as a scrape shows it: name, kind, help and its samples."""

    name: str
    kind: Kind
    help: str
    samples: list[Sample] = field(default_factory=list)


def gauge(name: str, help: str, values: float | Iterable[tuple[Labels, float]]) -> Family:
    """A gauge read at scrape time: one value, or (labels, value) pairs."""
    if isinstance(values, (int, float)):
        return Family(name, "gauge", help, [Sample("", (), float(values))])
    return Family(name, "gauge", help, [Sample("", labels, float(v)) for labels, v in values])


def counted(name: str, help: str, values: float | Iterable[tuple[Labels, float]]) -> Family:
    """A counter kept elsewhere (a daemon's own tally), read at scrape time."""
    family = gauge(name, help, values)
    family.kind = "counter"
    return family


class Counter:
    """A monotonic count by label values; `seed` shows a label set as 0 before its first increment (a series
    that appears only once it moves breaks rate() over its first minute)."""

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()):
        self.name, self.help, self.labelnames = name, help, tuple(labelnames)
        self._lock = threading.Lock()
        self._values: dict[tuple[str, ...], float] = {} if labelnames else {(): 0.0}

    def seed(self, *values: str) -> None:
        with self._lock:
            self._values.setdefault(values, 0.0)

    def inc(self, *values: str, amount: float = 1.0) -> None:
        with self._lock:
            self._values[values] = self._values.get(values, 0.0) + amount

    def value(self, *values: str) -> float:
        with self._lock:
            return self._values.get(values, 0.0)

    def family(self) -> Family:
        with self._lock:
            items = sorted(self._values.items())
        return Family(self.name, "counter", self.help,
                      [Sample("", tuple(zip(self.labelnames, key, strict=True)), v) for key, v in items])


class Histogram:
    """Observations counted into fixed buckets by label values (cumulative only when written out)."""

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = (),
                 buckets: Sequence[float] = LATENCY_BUCKETS):
        self.name, self.help, self.labelnames = name, help, tuple(labelnames)
        self.buckets = tuple(sorted(buckets))
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, ...], list[float]] = {}  # per label set: a count a bucket, +Inf, then sum

    def seed(self, *values: str) -> None:
        with self._lock:
            self._counts.setdefault(values, [0.0] * (len(self.buckets) + 2))

    def observe(self, value: float, *values: str) -> None:
        index = bisect.bisect_left(self.buckets, value)  # le is inclusive: value == bound falls in that bucket
        with self._lock:
            counts = self._counts.get(values)
            if counts is None:
                counts = self._counts[values] = [0.0] * (len(self.buckets) + 2)
            counts[index] += 1
            counts[-1] += value

    def family(self) -> Family:
        with self._lock:
            items = sorted((key, list(counts)) for key, counts in self._counts.items())
        samples: list[Sample] = []
        for key, counts in items:
            labels = tuple(zip(self.labelnames, key, strict=True))
            running = 0.0
            for bound, count in zip((*self.buckets, float("inf")), counts, strict=False):
                running += count
                samples.append(Sample("_bucket", (*labels, ("le", _bound(bound))), running))
            samples.append(Sample("_sum", labels, counts[-1]))
            samples.append(Sample("_count", labels, running))
        return Family(self.name, "histogram", self.help, samples)


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)
