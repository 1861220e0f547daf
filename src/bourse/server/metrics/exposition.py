"""The Prometheus text exposition format (version 0.0.4), written by hand: a few gauges and
one histogram do not justify a dependency (prometheus_client keeps its own registry of
process-global metrics, which sits badly with several apps in one test process)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Labels = Mapping[str, str]


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    kind: str = "gauge"  # gauge | counter | histogram
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)  # suffix, labels, v

    def add(self, value: float, suffix: str = "", **labels: str) -> Family:
        self.samples.append((suffix, labels, value))
        return self


def gauge_by(name: str, help_text: str, label: str, counts: Mapping[str, int],
             every: Iterable[str]) -> Family:
    """One sample per value of ``label``, zero for those with no rows."""
    family = Family(name, help_text)
    for key in every:
        family.add(counts.get(key, 0), **{label: key})
    return family


def histogram(name: str, help_text: str, bounds: Sequence[float], cumulative: Sequence[int],
              *, count: int, total: float) -> Family:
    """``cumulative[i]`` observations at most ``bounds[i]``."""
    family = Family(name, help_text, "histogram")
    for bound, seen in zip(bounds, cumulative, strict=True):
        family.add(seen, "_bucket", le=_number(bound))
    family.add(count, "_bucket", le="+Inf")
    family.add(total, "_sum")
    return family.add(count, "_count")


def render(families: Iterable[Family]) -> str:
    lines = []
    for f in families:
        lines += [f"# HELP {f.name} {_escape_help(f.help)}", f"# TYPE {f.name} {f.kind}"]
        lines += [f"{f.name}{suffix}{_labels(labels)} {_number(value)}"
                  for suffix, labels, value in f.samples]
    return "\n".join(lines) + "\n"


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
    return "{" + inner + "}"


def _escape_label(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _escape_help(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n")


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return str(int(value)) if float(value).is_integer() else repr(float(value))
