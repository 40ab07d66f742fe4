"""Reading a daemon's /metrics as Prometheus would: one GET, then prometheus_client's own text parser (a
reader independent of the daemons' writer), and the naming rules checked on what it parsed."""

from __future__ import annotations

import re
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from kit.robust_kit import RawResponse, build_request, exchange, host_of

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
# Base units the figures use; a name that measures one of these says so at its end (before _total).
UNIT_WORDS = {"seconds": "seconds", "bytes": "bytes", "usd": "usd"}


def metrics_url(url: str) -> str:
    return url.rsplit("/mcp", 1)[0] + "/metrics"


def get_metrics(url: str, headers: dict[str, str] | None = None) -> RawResponse:
    """GET /metrics of the daemon whose MCP URL is `url`, with any status."""
    pairs = [("Host", host_of(url)), *(headers or {}).items()]
    return exchange(url, build_request("GET", "/metrics", "HTTP/1.1", pairs, b""), "GET")


@dataclass
class Scrape:
    """One parsed scrape: samples by (name, labels)."""

    text: str
    kinds: dict[str, str]  # family name (as the parser names it) -> type

    def __post_init__(self) -> None:
        self.samples: dict[tuple[str, frozenset], float] = {}
        self.names: dict[str, set[str]] = {}  # family name -> the names of its samples
        for family in text_string_to_metric_families(self.text):
            self.kinds[family.name] = family.type
            self.names[family.name] = {sample.name for sample in family.samples}
            for sample in family.samples:
                self.samples[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def value(self, name: str, **labels: str) -> float:
        key = (name, frozenset(labels.items()))
        assert key in self.samples, f"no sample {name}{labels} in:\n{self.text}"
        return self.samples[key]

    def total(self, name: str, **labels: str) -> float:
        """The sum of every sample of `name` whose labels include `labels`."""
        wanted = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and wanted <= ls)


def scrape(url: str, token: str | None = None) -> Scrape:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    resp = get_metrics(url, headers)
    assert resp.status == 200, (resp.status, resp.body)
    assert resp.headers["content-type"].startswith("text/plain; version=0.0.4"), resp.headers
    got = Scrape(resp.body.decode(), {})
    check_naming(got)
    return got


def check_naming(got: Scrape) -> None:
    """Prometheus' naming rules: valid names and labels, counters end in _total, histograms have buckets, a
    sum and a count, a family of one namespace, a unit word where the figure has one."""
    for (name, labels), value in got.samples.items():
        assert NAME.match(name), name
        assert all(LABEL.match(k) and not k.startswith("__") for k, _ in labels), (name, labels)
        assert name.startswith(("hive_bash_", "hive_subagent_")), name
        assert value == value, f"{name} is NaN"
    for family, kind in got.kinds.items():
        names = got.names[family]
        if kind == "counter":
            assert names == {family + "_total"}, (family, names)
        if kind == "histogram":
            assert {family + "_bucket", family + "_sum", family + "_count"} <= names, (family, names)
            assert family.endswith("_seconds"), family
        for word in ("duration", "time", "uptime"):
            if word in family.split("_"):
                assert family.endswith("_seconds"), family
        if "cost" in family.split("_"):
            assert family.endswith("_usd"), family


def refused_status(url: str, **headers: str) -> int:
    return get_metrics(url, headers).status


