"""The metrics text, written by common/metrics, read back by prometheus_client's parser: label values with the
format's three escapes, help text with a newline, histogram buckets cumulative with an inclusive `le`, a
failing collector left out of the scrape and counted, and counters that lose no increment under threads."""

from __future__ import annotations

import math
import threading

from prometheus_client.parser import text_string_to_metric_families

from common.metrics import MetricsRegistry, counted, gauge


def _parsed(text: str) -> dict[str, dict]:
    return {f.name: {(s.name, tuple(sorted(s.labels.items()))): s.value for s in f.samples} | {"_type": f.type}
            for f in text_string_to_metric_families(text)}


def test_escapes_and_kinds_read_back_exactly():
    registry = MetricsRegistry("t", clock=iter([10.0, 12.5]).__next__)
    calls = registry.counter("calls_total", 'Calls, "quoted" \\ and\na second line.', ("tool",))
    odd = 'a "b" \\ c\nd'
    calls.inc(odd)
    calls.inc(odd, amount=2)
    calls.seed("never")
    registry.collect(lambda: [gauge("t_level", "A level.", [((("kind", "x"),), 1.5), ((("kind", "y"),), math.inf)]),
                              counted("t_other_total", "Kept elsewhere.", 7)])
    text = registry.text()
    got = _parsed(text)
    assert got["t_calls"][("t_calls_total", (("tool", odd),))] == 3
    assert got["t_calls"][("t_calls_total", (("tool", "never"),))] == 0
    assert got["t_calls"]["_type"] == "counter"
    assert got["t_level"][("t_level", (("kind", "x"),))] == 1.5
    assert got["t_level"][("t_level", (("kind", "y"),))] == math.inf
    assert got["t_other"][("t_other_total", ())] == 7 and got["t_other"]["_type"] == "counter"
    assert got["t_uptime_seconds"][("t_uptime_seconds", ())] == 2.5
    assert '# HELP t_calls_total Calls, "quoted" \\\\ and\\na second line.' in text.splitlines()


def test_histogram_buckets_are_cumulative_and_le_is_inclusive():
    registry = MetricsRegistry("t")
    latency = registry.histogram("wait_seconds", "Waits.", ("tool",), buckets=(0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 3.0):
        latency.observe(value, "run")
    got = _parsed(registry.text())["t_wait_seconds"]
    bucket = {dict(key[1])["le"]: v for key, v in got.items() if key[0] == "t_wait_seconds_bucket"}
    assert bucket == {"0.1": 2, "1.0": 3, "+Inf": 4}
    assert got[("t_wait_seconds_count", (("tool", "run"),))] == 4
    assert got[("t_wait_seconds_sum", (("tool", "run"),))] == 3.65


def test_a_failing_collector_is_left_out_and_counted():
    registry = MetricsRegistry("t")

    def broken():
        raise OSError("the disk went away")

    registry.collect(broken)
    registry.collect(lambda: [gauge("t_fine", "Still here.", 1)])
    got = _parsed(registry.text())
    assert got["t_fine"][("t_fine", ())] == 1
    assert got["t_scrape_errors"][("t_scrape_errors_total", ())] == 1


def test_no_increment_is_lost_between_threads():
    registry = MetricsRegistry("t")
    calls = registry.counter("calls_total", "Calls.", ("tool",))
    latency = registry.histogram("call_seconds", "Latency.", ("tool",))

    def hammer():
        for _ in range(5000):
            calls.inc("run")
            latency.observe(0.001, "run")

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = _parsed(registry.text())
    assert got["t_calls"][("t_calls_total", (("tool", "run"),))] == 20000
    assert got["t_call_seconds"][("t_call_seconds_count", (("tool", "run"),))] == 20000
