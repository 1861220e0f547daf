"""Judging a canary: advance, hold or roll back a rollout step, with the reason.

A new version (the canary) takes ``steps`` percent of the traffic in turn; at each step the
gateway's figures of the canary are compared with the stable version's over the same window
(since the step began):

- **roll back** when the canary breaks a rule with enough evidence:
  - errors: the canary's error rate exceeds the stable one's by more than ``error_margin``
    (percentage points) — judged on the *lower* 99 % confidence bound of the canary's rate
    (Wilson), once it has served ``min_requests``: a few unlucky errors out of a hundred do
    not roll back a good version, 20 % errors do within a few hundred requests;
  - latency: the canary's p99 exceeds the stable one's by more than ``p99_margin_ms``, once
    both have served ``min_requests`` — judged on a bound too: more than 5 % of the canary's
    requests (at 99 % confidence) took longer than the stable p99 + the margin, where an
    equal version has about 1 % (a p99 alone moves with a handful of slow requests);
  - readiness: none of its replicas became ready within ``ready_timeout_s`` of the rollout's
    start (it never took traffic);
- **advance** to the next step once the step has lasted ``pause_s`` and the canary has served
  ``min_requests`` in it with an observed error rate within the margin (the last step
  promotes it);
- **hold** otherwise, saying what it waits for — in particular while the observed error rate
  is over the margin but not yet beyond doubt: the step gathers more requests instead of
  advancing a doubtful version or rolling back on a few unlucky errors.

The stable version's error rate is the baseline only when it has served ``min_requests`` in
the window; with fewer the baseline is 0 (the canary is held to the margin alone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from bourse.core.window import Figures

Z_99 = 2.326  # one-sided 99 %
SLOW_SHARE = 0.05  # of a canary's requests over the stable p99 + margin, at 99 % confidence


class Verdict(StrEnum):
    ADVANCE = "advance"
    HOLD = "hold"
    ROLL_BACK = "roll_back"


@dataclass(frozen=True)
class Rules:
    steps: tuple[int, ...] = (10, 50, 100)
    pause_s: float = 10.0
    error_margin: float = 0.05  # fraction above the stable rate (0.05: 5 points)
    p99_margin_ms: float = 200.0
    min_requests: int = 100
    ready_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        ordered = all(0 < a < b for a, b in zip(self.steps, self.steps[1:], strict=False))
        if not self.steps or self.steps[-1] != 100 or not ordered or self.steps[0] <= 0:
            raise ValueError(f"steps {self.steps} must rise from above 0 and end at 100")
        if (self.pause_s < 0 or not 0 <= self.error_margin <= 1 or self.p99_margin_ms < 0
                or self.min_requests < 1 or self.ready_timeout_s <= 0):
            raise ValueError(f"invalid rollout rules: {self}")


@dataclass(frozen=True)
class Step:
    """Where a rollout is: its step (an index into ``steps``), since when, and since when the
    whole rollout runs."""

    index: int
    since: float
    started: float
    ready: bool  # some canary replica is ready (has taken traffic)


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str

    @property
    def final(self) -> bool:
        return self.verdict is Verdict.ROLL_BACK


def wilson_low(errors: int, n: int, z: float = Z_99) -> float:
    """The lower confidence bound of an error rate of ``errors`` in ``n``."""
    if n <= 0 or errors <= 0:
        return 0.0
    p = errors / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n))


def judge(rules: Rules, step: Step, canary: Figures, stable: Figures, now: float) -> Decision:
    """The decision on the current step, from both versions' figures since it began."""
    if not step.ready:
        if now - step.started >= rules.ready_timeout_s:
            return Decision(Verdict.ROLL_BACK, f"no replica of the new version became ready "
                                               f"within {rules.ready_timeout_s:.0f} s")
        return Decision(Verdict.HOLD, "waiting for a replica of the new version to be ready")
    broken = _broken(rules, canary, stable)
    if broken is not None:
        return Decision(Verdict.ROLL_BACK, broken)
    return _progress(rules, step, canary, stable, now)


def _broken(rules: Rules, canary: Figures, stable: Figures) -> str | None:
    if canary.requests < rules.min_requests:
        return None
    return _errors_broken(rules, canary, stable) or _latency_broken(rules, canary, stable)


def _baseline(rules: Rules, stable: Figures) -> float:
    return stable.error_rate if stable.requests >= rules.min_requests else 0.0


def _errors_broken(rules: Rules, canary: Figures, stable: Figures) -> str | None:
    baseline = _baseline(rules, stable)
    low = wilson_low(canary.errors, canary.requests)
    if low <= baseline + rules.error_margin:
        return None
    return (f"error rate {canary.error_rate:.1%} ({canary.errors} of {canary.requests}; at "
            f"least {low:.1%} at 99 % confidence) is over the stable version's "
            f"{baseline:.1%} + {rules.error_margin:.0%}")


def _latency_broken(rules: Rules, canary: Figures, stable: Figures) -> str | None:
    """The canary's p99 is over the stable one's + the margin — judged, like errors, on a
    confidence bound: of the canary's requests, more than ``SLOW_SHARE`` took longer than
    the stable p99 + margin at 99 % confidence (an equal version has about 1 % there), so a
    few slow requests on a loaded machine do not make a p99 that rolls back."""
    if (stable.requests < rules.min_requests or canary.p99_ms is None
            or stable.p99_ms is None):
        return None
    threshold = stable.p99_ms + rules.p99_margin_ms
    slow = canary.slower_than(threshold)
    if wilson_low(slow, canary.requests) <= SLOW_SHARE:
        return None
    return (f"p99 {canary.p99_ms:.0f} ms is over the stable version's {stable.p99_ms:.0f} ms "
            f"+ {rules.p99_margin_ms:.0f} ms ({slow} of {canary.requests} requests slower "
            f"than {threshold:.0f} ms)")


def _progress(rules: Rules, step: Step, canary: Figures, stable: Figures,
              now: float) -> Decision:
    waited = now - step.since
    weight = rules.steps[step.index]
    if canary.requests < rules.min_requests:
        return Decision(Verdict.HOLD, f"{canary.requests} of {rules.min_requests} requests "
                                      f"at {weight} % before judging")
    baseline = _baseline(rules, stable)
    if canary.error_rate > baseline + rules.error_margin:
        return Decision(Verdict.HOLD, f"error rate {canary.error_rate:.1%} over "
                                      f"{baseline:.1%} + {rules.error_margin:.0%}, not yet "
                                      f"beyond doubt: more requests at {weight} %")
    if waited < rules.pause_s:
        return Decision(Verdict.HOLD, f"{waited:.0f} of {rules.pause_s:.0f} s at {weight} %")
    if step.index + 1 >= len(rules.steps):
        return Decision(Verdict.ADVANCE, f"promoted: {canary.requests} requests at {weight} % "
                                         "within the rules")
    return Decision(Verdict.ADVANCE, f"{weight} % → {rules.steps[step.index + 1]} %: "
                                     f"{canary.requests} requests within the rules "
                                     f"(errors {canary.error_rate:.1%}, p99 "
                                     f"{_ms(canary.p99_ms)})")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def weights(rules: Rules, index: int | None) -> tuple[int, int]:
    """(stable, canary) percent at step ``index``; None: no rollout (all to stable)."""
    if index is None:
        return 100, 0
    canary = rules.steps[index]
    return 100 - canary, canary
