"""LTTB downsampling: the ends kept, the count bounded, peaks kept, short series unchanged."""

from __future__ import annotations

import math

import pytest

from bourse.core.lttb import lttb


@pytest.mark.parametrize(("size", "n"), [(0, 10), (1, 10), (2, 10), (10, 10), (5, 100)])
def test_a_series_that_fits_is_unchanged(size: int, n: int) -> None:
    points = [(float(i), float(i * i)) for i in range(size)]
    assert lttb(points, n) == points


@pytest.mark.parametrize("n", [3, 10, 100, 999])
def test_ends_are_kept_count_is_bounded_and_order_holds(n: int) -> None:
    points = [(float(i), math.sin(i / 50)) for i in range(10_000)]
    kept = lttb(points, n)
    assert len(kept) == n and kept[0] == points[0] and kept[-1] == points[-1]
    assert [x for x, _ in kept] == sorted(x for x, _ in kept)


def test_a_spike_survives() -> None:
    points = [(float(i), 0.0) for i in range(10_000)]
    points[6_789] = (6_789.0, 50.0)
    assert (6_789.0, 50.0) in lttb(points, 50)


def _textbook(points: list[tuple[float, float]], n: int) -> list[tuple[float, float]]:
    """LTTB as the paper writes it, one bucket at a time."""
    every = (len(points) - 2) / (n - 2)
    kept, a = [points[0]], points[0]
    for b in range(n - 2):
        start, end = int(b * every) + 1, int((b + 1) * every) + 1
        after = points[end:min(int((b + 2) * every) + 1, len(points))] or [points[-1]]
        cx, cy = sum(x for x, _ in after) / len(after), sum(y for _, y in after) / len(after)
        a = max(points[start:end], key=lambda p: abs(
            (a[0] - cx) * (p[1] - a[1]) - (a[0] - p[0]) * (cy - a[1])))
        kept.append(a)
    return [*kept, points[-1]]


@pytest.mark.parametrize(("size", "n"), [(3_126, 1000), (10_000, 999), (50, 3), (100, 98)])
def test_the_same_points_as_the_textbook_algorithm(size: int, n: int) -> None:
    points = [(float(i * 3), math.sin(i / 7) * (i % 13)) for i in range(size)]
    assert lttb(points, n) == _textbook(points, n)
