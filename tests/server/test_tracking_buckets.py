"""The chart's step buckets, made from a batch (pure)."""

from __future__ import annotations

import math

import pytest

from bourse.server.services.tracking_charts import LEVELS, bucket_rows, read_plan
from bourse.server.services.tracking_log import Point, _newest, point_rows


def test_buckets_hold_each_levels_extremes_and_skip_nan() -> None:
    points = [Point("loss", float(s % 7), s, s) for s in range(130)]
    points.append(Point("loss", math.nan, 1, 200))
    rows = bucket_rows("r", points)
    finest = sorted((r["bucket"], r["min_step"], r["max_step"], r["min_value"], r["max_value"])
                    for r in rows if r["level"] == LEVELS[0])
    assert finest == [(0, 0, 63, 0.0, 6.0), (1, 64, 127, 0.0, 6.0), (2, 128, 129, 2.0, 3.0)]
    assert [(r["bucket"], r["min_step"], r["max_step"]) for r in rows
            if r["level"] == LEVELS[1]] == [(0, 0, 129)]


@pytest.mark.parametrize(("span", "points", "level", "shift"), [
    (100_000, 1000, 6, 2),  # 1,562 buckets of 64 steps, merged by 4: 390
    (4_000, 1000, 6, 0),  # 62 buckets: none merged
    (10_000_000, 1000, 12, 3),  # 2,441 buckets of 4,096 steps, merged by 8: 305
])
def test_a_chart_reads_the_finest_fitting_level_merged_to_half_its_points(
        span: int, points: int, level: int, shift: int) -> None:
    assert read_plan(span, points) == (level, shift)
    assert (span >> level) <= points * 4 and (span >> level) >> shift < points // 2


def test_a_batch_rows_tell_same_step_and_time_apart_and_store_nan_as_null() -> None:
    plain = [Point("loss", 0.5, 10, 1), Point("loss", math.nan, 11, 2)]
    assert point_rows("r", plain) == [(0, "r", "loss", 0.5, 10, 1, 0),
                                      (0, "r", "loss", None, 11, 2, 0)]
    assert point_rows("r", plain[:1], attempt=3) == [(0, "r", "loss", 0.5, 10, 1, 3)]
    twice = [Point("loss", 0.5, 10, 1), Point("acc", 0.1, 10, 1), Point("loss", 0.7, 10, 1)]
    assert [row[0] for row in point_rows("r", twice)] == [0, 0, 1]


def test_the_latest_point_of_each_key_is_the_highest_step_then_time_the_last_of_equals() -> None:
    points = [Point("a", 1.0, 5, 3), Point("a", 2.0, 9, 2), Point("a", 3.0, 5, 3),
              Point("b", 4.0, 1, 0)]
    assert _newest(points) == {"a": (points[2], 3), "b": (points[3], 1)}
