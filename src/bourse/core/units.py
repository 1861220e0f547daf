"""Sizes, ranges and prices as people write them: ``24GB``, ``40GB+``, ``16GB..80GB``, ``$0.50``.

GPU vendors and clouds write "GB" for binary gigabytes (an A100 40GB has 40960 MiB), so here
GB == GiB, MB == MiB and TB == TiB. A bare number is in GiB.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from bourse.core.errors import InvalidInput

_UNITS_GIB = {
    "": 1.0, "g": 1.0, "gb": 1.0, "gib": 1.0,
    "m": 1 / 1024, "mb": 1 / 1024, "mib": 1 / 1024,
    "t": 1024.0, "tb": 1024.0, "tib": 1024.0,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


_JSON_TYPES = {type(None): "null", bool: "a boolean", list: "a list", dict: "an object"}


def _scalar(value: object, field: str, expected: str) -> None:
    """Refuse what is neither a number nor a string (null, a list, an object of a JSON
    body): the parsers below read only those."""
    if isinstance(value, bool) or not isinstance(value, str | float | int):
        kind = _JSON_TYPES.get(type(value), f"a {type(value).__name__}")
        raise InvalidInput(f"expected {expected}, got {kind}", field=field)


def parse_size_gib(text: str | float | int, *, field: str) -> float:
    """Parse ``"24GB"``, ``"512MiB"``, ``"1.5TB"`` or a number (GiB) into GiB."""
    if isinstance(text, bool):
        raise InvalidInput(f"expected a size, got {text!r}", field=field, hint="write e.g. 24GB")
    _scalar(text, field, "a size such as 24GB")
    if isinstance(text, int | float):
        value = float(text)
    else:
        match = _SIZE.match(text)
        unit = match.group(2).lower() if match else ""
        if not match or unit not in _UNITS_GIB:
            raise InvalidInput(
                f"cannot read size {text!r}", field=field,
                hint="write a number and a unit, e.g. 24GB",
            )
        value = float(match.group(1)) * _UNITS_GIB[unit]
    if not math.isfinite(value) or value < 0:
        raise InvalidInput(f"size must be a positive number, got {text!r}", field=field)
    return value


@dataclass(frozen=True, slots=True)
class Range:
    """A closed range ``[low, high]``; ``high`` None means unbounded."""

    low: float = 0.0
    high: float | None = None

    def __contains__(self, value: float) -> bool:
        return value >= self.low and (self.high is None or value <= self.high)

    def describe(self, unit: str = "") -> str:
        low = _fmt(self.low) + unit
        if self.high is None:
            return f"{low}+"
        if self.high == self.low:
            return low
        return f"{low}..{_fmt(self.high)}{unit}"


def _fmt(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def parse_range(text: str | float | int | Range, *, field: str, sizes: bool = True) -> Range:
    """Parse ``"40GB+"``, ``"16GB..80GB"``, ``"..64GB"`` or ``"8"`` (meaning at least 8)."""
    if isinstance(text, Range):
        return text
    _scalar(text, field, "a number or a range such as '8' or '16GB..80GB'")

    def one(value: str | float | int) -> float:
        return parse_size_gib(value, field=field) if sizes else _parse_number(value, field=field)

    if isinstance(text, int | float):
        return Range(one(text))
    raw = text.strip()
    if ".." in raw:
        low_text, high_text = raw.split("..", 1)
        low = one(low_text) if low_text.strip() else 0.0
        high = one(high_text) if high_text.strip() else None
    else:
        low, high = one(raw[:-1] if raw.endswith("+") else raw), None
    if high is not None and high < low:
        raise InvalidInput(
            f"empty range {text!r}: the upper bound is below the lower bound",
            field=field, hint="write low..high, e.g. 24GB..80GB",
        )
    return Range(low, high)


def _parse_number(text: str | float | int, *, field: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidInput(f"expected a number, got {text!r}", field=field) from None
    if not math.isfinite(value) or value < 0:
        raise InvalidInput(f"expected a positive number, got {text!r}", field=field)
    return value


MAX_PRICE = 10_000.0  # US dollars per hour: more than any machine costs

_PRICE = re.compile(r"^\s*\$?\s*(\d+(?:\.\d+)?|\.\d+)\s*(?:/\s*h(?:r|our)?)?\s*$", re.IGNORECASE)


_SHARE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%?)\s*$")


def _written(text: str | float | int, field: str, kind: str, example: str, *,
             pattern: re.Pattern[str], hint: str | None = None) -> float | re.Match[str]:
    """A number as given, or the match of ``pattern`` on the text; refused otherwise, saying
    what a ``kind`` looks like (``example``)."""
    if isinstance(text, bool):
        raise InvalidInput(f"{kind} must be a number, got {text!r}", field=field)
    _scalar(text, field, f"a {kind} such as {example}")
    if isinstance(text, int | float):
        return float(text)
    match = pattern.match(text)
    if not match:
        raise InvalidInput(f"{kind} must be {hint or 'a number'}, got {text!r}", field=field,
                           hint=f"write e.g. {example}")
    return match


def parse_share(text: str | float | int, *, field: str = "min_reliability") -> float:
    """A share in (0, 1]: ``0.99`` or ``"99%"`` (a percentage only with its sign)."""
    read = _written(text, field, "share", "0.99 or 99%", pattern=_SHARE,
                    hint="a number up to 1, or a percentage such as 99%")
    value = read if isinstance(read, float) else \
        float(read.group(1)) / (100 if read.group(2) else 1)
    if not math.isfinite(value) or not 0 < value <= 1:
        raise InvalidInput(f"share must be above 0 and at most 1 (100%), got {text!r}",
                           field=field, hint="0.99 asks for nodes with a score of 99% or more")
    return value


def parse_price(text: str | float | int, *, field: str = "max_price") -> float:
    """Parse a price in US dollars per hour: ``0.5``, ``"$0.50"``, ``"0.5/h"``."""
    read = _written(text, field, "price", "0.5 or $0.50/h", pattern=_PRICE,
                    hint="a number of US dollars per hour")
    value = read if isinstance(read, float) else float(read.group(1))
    if not math.isfinite(value) or value <= 0:
        raise InvalidInput(
            f"price must be above zero, got {text!r}", field=field,
            hint="a ceiling of $0/h matches nothing; leave it out for no ceiling",
        )
    if value > MAX_PRICE:
        raise InvalidInput(f"${value:g}/h is more than any machine costs", field=field,
                           hint=f"write at most {MAX_PRICE:g}, or leave it out for no ceiling")
    return value


def format_bytes(size: int) -> str:
    """``1048576`` -> ``1 MiB``, ``1500000`` -> ``1.4 MiB``, ``512`` -> ``512 B``."""
    value, unit = float(size), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$", re.IGNORECASE)
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
MAX_DURATION_S = 100 * 365 * 86400.0  # a century: longer is a typo, not a plan


def parse_duration(text: str | float | int, *, field: str = "duration",
                   at_most: float = MAX_DURATION_S) -> float:
    """Seconds from ``30``, ``30s``, ``2m``, ``1.5h``, ``7d`` or ``2w``, at most ``at_most``."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        found = _DURATION.match(str(text))
        if found is None:
            raise InvalidInput(f"cannot read {text!r} as a duration", field=field,
                               hint="write a number of seconds or e.g. 30s, 2m, 1h, 7d, 2w")
        seconds = float(found.group(1)) * _SECONDS[(found.group(2) or "s").lower()]
    if not 0 <= seconds < float("inf"):
        raise InvalidInput(f"{text!r} is not a positive duration", field=field)
    if seconds > at_most:
        raise InvalidInput(f"{text!r} is longer than the most allowed, "
                           f"{describe_duration(at_most)}", field=field,
                           hint=f"write at most {describe_duration(at_most)}")
    return seconds


def describe_duration(seconds: float) -> str:
    """``86400`` -> ``1d``, ``5400`` -> ``90m``: the largest unit that counts it whole."""
    for unit in ("w", "d", "h", "m"):
        count = seconds / _SECONDS[unit]
        if count >= 1 and count == int(count):
            return f"{int(count)}{unit}"
    return f"{seconds:g}s"
