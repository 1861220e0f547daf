"""Downsampling a curve for a chart: Largest-Triangle-Three-Buckets (Steinarsson, 2013).

LTTB keeps the first and the last point and, from each of ``n - 2`` equal buckets between
them, the point that makes the largest triangle with the point kept before it and the mean of
the next bucket: the shape of the curve (its peaks, dips and slopes) survives at a few
hundred points. Pure: points in, points out.
"""

from __future__ import annotations

from collections.abc import Sequence

Point = tuple[float, float]


def lttb(points: Sequence[Point], n: int) -> list[Point]:
    """At most ``n`` of ``points`` (sorted by x), chosen by LTTB; all of them if they fit."""
    if n >= len(points) or len(points) <= 2:
        return list(points)
    if n < 3:
        return [points[0], points[-1]][:max(n, 1)]
    every = (len(points) - 2) / (n - 2)
    kept = [points[0]]
    chosen = 0
    for bucket in range(n - 2):
        start, end = int(bucket * every) + 1, int((bucket + 1) * every) + 1
        mean_x, mean_y = _mean(points, end, min(int((bucket + 2) * every) + 1, len(points)))
        chosen = _largest(points, start, end, points[chosen], (mean_x, mean_y))
        kept.append(points[chosen])
    kept.append(points[-1])
    return kept


def _mean(points: Sequence[Point], start: int, end: int) -> Point:
    if start >= end:  # the last bucket: the next "bucket" is the last point
        return points[-1]
    xs = ys = 0.0
    for x, y in points[start:end]:
        xs += x
        ys += y
    return xs / (end - start), ys / (end - start)


def _largest(points: Sequence[Point], start: int, end: int, a: Point, c: Point) -> int:
    """The index in ``[start, end)`` of the point making the largest triangle with a and c."""
    (ax, ay), (cx, cy) = a, c
    best, best_area = start, -1.0
    for index in range(start, end):
        x, y = points[index]
        area = abs((ax - cx) * (y - ay) - (ax - x) * (cy - ay))
        if area > best_area:
            best, best_area = index, area
    return best
