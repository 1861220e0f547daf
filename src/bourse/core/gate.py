"""A CI gate: does a run's metric regress against a baseline? Pure, from two mappings.

Each gated metric names its direction (higher is better, e.g. accuracy; or lower, e.g. loss)
and a tolerance: the largest worsening accepted, absolute (``0.01``) or relative to the
baseline (``"1%"``). A metric missing from either side fails the gate, saying which.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    metric: str
    lower_is_better: bool = False
    tolerance: float = 0.0
    relative: bool = False  # tolerance is a fraction of the baseline


@dataclass(frozen=True)
class Outcome:
    metric: str
    passed: bool
    message: str


def parse_tolerance(text: str) -> tuple[float, bool]:
    """``0.01`` (absolute) or ``1%`` (relative)."""
    relative = text.endswith("%")
    value = float(text[:-1]) / 100 if relative else float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"tolerance {text!r} must be a number at least 0, e.g. 0.01 or 1%")
    return value, relative


def judge(check: Check, result: Mapping[str, object],
          baseline: Mapping[str, object]) -> Outcome:
    got, base = _number(result, check.metric), _number(baseline, check.metric)
    if got is None or base is None:
        side = "the result" if got is None else "the baseline"
        return Outcome(check.metric, False, f"{check.metric}: not a number in {side}")
    allowed = check.tolerance * abs(base) if check.relative else check.tolerance
    worse = (got - base) if check.lower_is_better else (base - got)
    direction = "lower" if check.lower_is_better else "higher"
    if worse > allowed + 1e-12 * max(1.0, abs(base)):  # 0.96 - 0.95 is 0.0100000001
        return Outcome(check.metric, False, f"{check.metric}: {got:g} regressed from {base:g} "
                                            f"by {worse:g} (allowed {allowed:g}; {direction} "
                                            "is better)")
    return Outcome(check.metric, True, f"{check.metric}: {got:g} against {base:g} (allowed "
                                       f"{allowed:g} worse; {direction} is better)")


def _number(values: Mapping[str, object], name: str) -> float | None:
    value = values.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def gate(checks: Sequence[Check], result: Mapping[str, object],
         baseline: Mapping[str, object]) -> list[Outcome]:
    return [judge(c, result, baseline) for c in checks]
