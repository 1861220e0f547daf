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
