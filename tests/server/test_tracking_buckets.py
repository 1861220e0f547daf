"""The chart's step buckets, made from a batch (pure)."""

from __future__ import annotations

import math

from bourse.server.services.tracking_charts import LEVELS, bucket_rows
from bourse.server.services.tracking_log import Point


def test_buckets_hold_each_levels_extremes_and_skip_nan() -> None:
    points = [Point("loss", float(s % 7), s, s) for s in range(130)]
    points.append(Point("loss", math.nan, 1, 200))
    rows = bucket_rows("r", points)
    finest = sorted((r["bucket"], r["min_step"], r["max_step"], r["min_value"], r["max_value"])
                    for r in rows if r["level"] == LEVELS[0])
    assert finest == [(0, 0, 63, 0.0, 6.0), (1, 64, 127, 0.0, 6.0), (2, 128, 129, 2.0, 3.0)]
    assert [(r["bucket"], r["min_step"], r["max_step"]) for r in rows
            if r["level"] == LEVELS[1]] == [(0, 0, 129)]
