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
    """At most ``n`` of ``points`` (sorted by x), chosen by LTTB; all of them if they fit.
    One loop, no call per point: a chart of ten long series runs it ten times per request."""
    size = len(points)
    if n >= size or size <= 2:
        return list(points)
    if n < 3:
        return [points[0], points[-1]][:max(n, 1)]
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    every = (size - 2) / (n - 2)
    edges = [min(int(b * every) + 1, size) for b in range(n)]
    kept = [points[0]]
    ax, ay = xs[0], ys[0]
    for bucket in range(n - 2):
        start, end, after = edges[bucket], edges[bucket + 1], edges[bucket + 2]
        if end >= after:  # the last bucket: the next "bucket" is the last point
            cx, cy = xs[-1], ys[-1]
        else:  # the mean of the next bucket
            cx, cy = sum(xs[end:after]) / (after - end), sum(ys[end:after]) / (after - end)
        dx, dy = ax - cx, cy - ay
        best, best_area = start, -1.0
        for index in range(start, end):
            area = abs(dx * (ys[index] - ay) - (ax - xs[index]) * dy)
            if area > best_area:
                best, best_area = index, area
        ax, ay = xs[best], ys[best]
        kept.append(points[best])
    kept.append(points[-1])
    return kept
