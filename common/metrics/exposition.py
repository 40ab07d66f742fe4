"""The Prometheus text exposition format, version 0.0.4: `# HELP` and `# TYPE` a family, then one line a
sample, `name{label="value"} number`. Help text escapes backslash and newline; label values also escape the
double quote (the format's only escapes)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from common.metrics.families import Family, Labels

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{name}="{_label_value(value)}"' for name, value in labels) + "}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def render(families: Iterable[Family]) -> str:
    """The text of these families, in order, ending with a newline."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        lines.extend(f"{family.name}{s.suffix}{_labels(s.labels)} {_number(s.value)}" for s in family.samples)
    return "\n".join(lines) + "\n"
