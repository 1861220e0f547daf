"""Sizes, ranges and prices as people write them (GB == GiB, a bare number is GiB)."""

from __future__ import annotations

import math

import pytest

from bourse.core.errors import InvalidInput
from bourse.core.units import Range, parse_duration, parse_price, parse_range, parse_size_gib


@pytest.mark.parametrize(
    ("text", "gib"),
    [
        ("24GB", 24.0),
        ("24gb", 24.0),
        ("24 GB", 24.0),
        ("24G", 24.0),
        ("24GiB", 24.0),
        ("512MiB", 0.5),
        ("512MB", 0.5),
        ("1024M", 1.0),
        ("1.5TB", 1536.0),
        ("2TiB", 2048.0),
        ("40", 40.0),
        ("40.5", 40.5),
        ("0", 0.0),
        (24, 24.0),
        (0.5, 0.5),
    ],
)
def test_sizes(text: str | float, gib: float) -> None:
    assert parse_size_gib(text, field="memory") == gib


@pytest.mark.parametrize(
    "text", ["", "abc", "24XB", "GB", "-1", "-1GB", "24 G B", True, False,
             math.nan, math.inf, -math.inf, -5, "nan", "inf", None, [24], {"gb": 24}],
)
def test_bad_sizes(text: object) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_size_gib(text, field="disk")  # type: ignore[arg-type]
    assert info.value.field == "disk"


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        ("40GB+", 40.0, None),
        ("16GB..80GB", 16.0, 80.0),
        ("..64GB", 0.0, 64.0),
        ("64GB..", 64.0, None),
        ("24GB", 24.0, None),  # a single size is a minimum
        ("16GB..16GB", 16.0, 16.0),
        ("512MB..1TB", 0.5, 1024.0),
        (8, 8.0, None),
    ],
)
def test_size_ranges(text: str | int, low: float, high: float | None) -> None:
    assert parse_range(text, field="memory") == Range(low, high)


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [("8", 8.0, None), ("8+", 8.0, None), ("8..32", 8.0, 32.0), ("..16", 0.0, 16.0),
     (4, 4.0, None)],
)
def test_number_ranges(text: str | int, low: float, high: float | None) -> None:
    assert parse_range(text, field="cpus", sizes=False) == Range(low, high)


@pytest.mark.parametrize(
    ("text", "sizes"),
    [("80GB..16GB", True), ("1TB..10GB", True), ("32..8", False), ("64GB..32GB", True)],
)
def test_empty_range_is_an_error(text: str, sizes: bool) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_range(text, field="memory", sizes=sizes)
    assert info.value.field == "memory"
    assert "empty range" in info.value.message


@pytest.mark.parametrize("text", ["lots", "8GB..lots", "+", True, "-8", None, [8], {}])
def test_bad_ranges(text: object) -> None:
    with pytest.raises(InvalidInput):
        parse_range(text, field="cpus", sizes=False)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("low", "high", "inside", "outside"),
    [(40.0, None, [40.0, 41.0, 1e9], [39.9, 0.0]), (16.0, 80.0, [16.0, 80.0, 40.0], [15.9, 80.1])],
)
def test_range_contains(low: float, high: float | None, inside: list[float],
                        outside: list[float]) -> None:
    bounds = Range(low, high)
    assert all(v in bounds for v in inside)
    assert not any(v in bounds for v in outside)


@pytest.mark.parametrize(
    ("text", "dollars"),
    [
        ("$0.50", 0.5),
        ("0.5/h", 0.5),
        ("0.5/hr", 0.5),
        ("$0.50/hour", 0.5),
        ("0.5 / H", 0.5),
        (".5", 0.5),
        ("2", 2.0),
        ("$ 2", 2.0),
        (2, 2.0),
        (0.5, 0.5),
        ("12.25", 12.25),
    ],
)
def test_prices(text: str | float, dollars: float) -> None:
    assert parse_price(text) == dollars


@pytest.mark.parametrize(
    "text",
    ["cheap", "", "$", "0", "0.0", "$0", 0, 0.0, -1, -0.5, "-1", math.nan, math.inf, "nan",
     "inf", True, False, "0.5/day", "€1", None, [1], {"usd": 1}],
)
def test_bad_prices(text: object) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_price(text)  # type: ignore[arg-type]
    assert info.value.field == "max_price"


def test_price_error_names_the_given_field() -> None:
    with pytest.raises(InvalidInput) as info:
        parse_price("cheap", field="bid")
    assert info.value.field == "bid"


@pytest.mark.parametrize(("text", "seconds"), [
    ("30", 30.0), (45, 45.0), ("250ms", 0.25), ("45s", 45.0), ("90m", 5400.0), ("1.5h", 5400.0),
    ("30d", 30 * 86400.0), ("2w", 14 * 86400.0), (" 7D ", 7 * 86400.0),
])
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["30x", "", "-5m", "1 month", "2w3d"])
def test_bad_durations_name_the_field_once(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_duration(text, field="--expires")
    assert caught.value.field == "--expires"
    assert "--expires" not in caught.value.message  # the CLI prints the field before it
