"""Downsampling resource samples: raw samples older than the raw retention become one row of
means per minute and series (node, job, attempt). Pure functions over the stored rows.

A minute's row is the mean of every numeric measure present in its samples (a GPU's by its
index), timed at the minute's start; disks keep the fullest reading, which is what a warning
would have looked at.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

PERIOD_S = 60.0
NUMBERS = ("cpu_percent", "memory_bytes", "memory_total_bytes", "processes", "work_bytes",
           "cache_bytes")
INTEGERS = frozenset({"memory_bytes", "memory_total_bytes", "processes", "work_bytes",
                      "cache_bytes"})
GPU_NUMBERS = ("utilization_percent", "memory_used_mib", "memory_total_mib", "power_w",
               "temperature_c")

SeriesKey = tuple[str, str | None, int | None]  # node, job, attempt


@dataclass(frozen=True)
class Row:
    """A stored sample, as the rollup sees it."""

    node_id: str
    job_id: str | None
    attempt: int | None
    time: float
    data: dict[str, Any]

    @property
    def series(self) -> SeriesKey:
        return (self.node_id, self.job_id, self.attempt)


def bucket(time: float, period: float = PERIOD_S) -> float:
    return math.floor(time / period) * period


def complete_before(rows: Sequence[Row], cutoff: float, complete: bool) -> float:
    """Where to cut a batch of rows read in time order: everything before ``cutoff``, or, when
    the read stopped at its limit (``complete`` False), before the minute of its last row, so
    that no minute is split between two rollups."""
    if complete or not rows:
        return cutoff
    return min(cutoff, bucket(rows[-1].time))


def downsample(rows: Iterable[Row], period: float = PERIOD_S) -> list[Row]:
    """One row per series and minute, holding the means."""
    groups: dict[tuple[SeriesKey, float], list[Row]] = defaultdict(list)
    for row in rows:
        groups[(row.series, bucket(row.time, period))].append(row)
    return [Row(*series, start, mean_sample([r.data for r in members]))
            for (series, start), members in sorted(groups.items(), key=_order)]


def _order(item: tuple[tuple[SeriesKey, float], list[Row]]) -> tuple[float, str, str, int]:
    (node, job, attempt), start = item[0]
    return (start, node, job or "", attempt or 0)


def mean_sample(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in NUMBERS:
        value = mean(s.get(name) for s in samples)
        if value is not None:
            out[name] = round(value) if name in INTEGERS else value
    out["gpus"] = _mean_gpus(samples)
    out["disks"] = _fullest_disks(samples)
    return out


def mean(values: Iterable[Any]) -> float | None:
    present = [float(v) for v in values if isinstance(v, int | float)]
    return sum(present) / len(present) if present else None


def _mean_gpus(samples: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    by_index: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for sample in samples:
        for gpu in sample.get("gpus") or ():
            by_index[int(gpu["index"])].append(gpu)
    gpus = []
    for index, readings in sorted(by_index.items()):
        means = {name: mean(r.get(name) for r in readings) for name in GPU_NUMBERS}
        gpus.append({"index": index, "uuid": readings[-1].get("uuid"), **means})
    return gpus


def _fullest_disks(samples: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    fullest: dict[str, dict[str, Any]] = {}
    for sample in samples:
        for disk in sample.get("disks") or ():
            known = fullest.get(disk["label"])
            if known is None or disk["used_bytes"] >= known["used_bytes"]:
                fullest[disk["label"]] = disk
    return list(fullest.values())


def gpu_percent(data: dict[str, Any]) -> float | None:
    """The busiest of a sample's GPUs (a column: what stall judgements read)."""
    found = [float(g["utilization_percent"]) for g in data.get("gpus") or ()
             if isinstance(g.get("utilization_percent"), int | float)]
    return max(found) if found else None
