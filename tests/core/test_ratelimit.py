"""The log rate limit's token bucket and allowance, as tables."""

from __future__ import annotations

import pytest

from bourse.core.errors import InvalidInput
from bourse.core.ratelimit import Bucket, LogLimit


@pytest.mark.parametrize(("takes", "expected"), [
    ([(20, 0.0)], [True]),  # the whole burst at once
    ([(21, 0.0)], [False]),  # more than the burst never fits
    ([(20, 0.0), (1, 0.0)], [True, False]),  # empty
    ([(20, 0.0), (10, 1.0)], [True, True]),  # refilled at the rate
    ([(20, 0.0), (11, 1.0), (11, 1.1)], [True, False, True]),  # a refusal costs nothing
    ([(0, 0.0), (20, 100.0), (1, 100.0)], [True, True, False]),  # never past the burst
    ([(5, 10.0), (5, 9.0)], [True, True]),  # a clock going back refills nothing
])
def test_bucket(takes: list[tuple[int, float]], expected: list[bool]) -> None:
    bucket = Bucket(LogLimit(rate=10, burst=20), now=0.0)
    assert [bucket.take(size, now) for size, now in takes] == expected


def test_rate_zero_is_no_limit() -> None:
    bucket = Bucket(LogLimit(rate=0, burst=0), now=0.0)
    assert bucket.take(10**12, 0.0)
    assert LogLimit(rate=0).allowance(5.0) == float("inf")


def test_allowance_is_what_the_bucket_can_ever_let_through() -> None:
    limit = LogLimit(rate=10, burst=20)
    assert [limit.allowance(t) for t in (-1.0, 0.0, 3.0)] == [20, 20, 50]


@pytest.mark.parametrize(("rate", "burst"), [(-1, 20), (10, -1), (10, 5)])
def test_bad_limits_say_what_to_do(rate: int, burst: int) -> None:
    with pytest.raises(InvalidInput) as info:
        LogLimit(rate=rate, burst=burst)
    assert info.value.hint


def test_marker() -> None:
    assert LogLimit(rate=8 << 20, burst=256 << 20).marker(1234) == (
        b"bourse: 1234 bytes dropped, log rate limit 8 MiB/s exceeded\n")
