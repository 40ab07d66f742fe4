"""Metrics in the Prometheus text format (version 0.0.4), written by hand: counters and histograms that the
call paths move (`families.py`), gauges a daemon reads from its own state when scraped (`Collector`s), one
registry a daemon (`registry.py`) and the text it serves on `/metrics` (`exposition.py`).

Why not `prometheus_client`: every figure but the call counters is read from the engine's own tables at
scrape time, so the library's thread-safe metric objects would buy two counters and a histogram; the text
format is a small stable page; and the tests parse our text with prometheus_client's own parser, an
independent reader of what we write rather than the writer checking itself."""

from common.metrics.exposition import CONTENT_TYPE, render
from common.metrics.families import Counter, Family, Histogram, counted, gauge
from common.metrics.registry import Collector, MetricsRegistry

__all__ = ["CONTENT_TYPE", "Collector", "Counter", "Family", "Histogram", "MetricsRegistry", "counted", "gauge",
           "render"]
