"""Judging a canary step, as tables: every verdict, every rule, and the noise the minimum
sample and the confidence bound keep from rolling a good version back."""

from __future__ import annotations

import random

import pytest

from bourse.core.rollout import Rules, Step, Verdict, judge, weights, wilson_low
from bourse.core.window import Figures, Window, bucket_of

RULES = Rules(steps=(10, 50, 100), pause_s=10, error_margin=0.05, p99_margin_ms=200,
              min_requests=100, ready_timeout_s=60)
READY = Step(index=0, since=100.0, started=100.0, ready=True)


def fig(requests: int, errors: int = 0, p99: float | None = 20.0) -> Figures:
    """``requests`` of which 2 % take ``p99`` ms, the rest 5 ms."""
    if not requests or p99 is None:
        return Figures(requests, errors, 10.0, None, None)
    slow = max(1, requests // 50)
    histogram = tuple(sorted({bucket_of(5.0): requests - slow, bucket_of(p99): slow}.items()))
    return Figures(requests, errors, 10.0, 5.0, p99, histogram)


def slow_fig(requests: int, slow_ms: float, share: float) -> Figures:
    """``share`` of ``requests`` at ``slow_ms``, the rest 5 ms (p99 as the window says)."""
    window = Window(seconds=60)
    for i in range(requests):
        window.record(105, slow_ms if i < share * requests else 5.0, False)
    return window.figures(110.0)


STABLE = fig(900, 9, p99=20.0)


@pytest.mark.parametrize(("step", "canary", "stable", "now", "verdict", "words"), [
    # readiness
    (Step(0, 100, 100, ready=False), fig(0), STABLE, 120, Verdict.HOLD, "ready"),
    (Step(0, 100, 100, ready=False), fig(0), STABLE, 160, Verdict.ROLL_BACK, "within 60 s"),
    # too few requests: hold, whatever they show
    (READY, fig(99, 99, p99=5000), STABLE, 200, Verdict.HOLD, "99 of 100 requests"),
    # enough, clean, but the step has not lasted
    (READY, fig(200), STABLE, 105, Verdict.HOLD, "5 of 10 s at 10 %"),
    # enough, clean, lasted: next step
    (READY, fig(200), STABLE, 111, Verdict.ADVANCE, "10 % → 50 %"),
    (Step(2, 100, 90, True), fig(200), STABLE, 111, Verdict.ADVANCE, "promoted"),
    # errors: 20 % of 100 rolls back at once, even before the pause
    (READY, fig(100, 20), STABLE, 101, Verdict.ROLL_BACK, "error rate 20.0%"),
    # 8 % of 100 is not enough evidence against 1 % + 5 points, nor good enough to advance
    (READY, fig(100, 8), STABLE, 111, Verdict.HOLD, "not yet beyond doubt"),
    (READY, fig(100, 5), STABLE, 111, Verdict.ADVANCE, "within"),
    # ... but 8 % of 2000 is
    (READY, fig(2000, 160), STABLE, 111, Verdict.ROLL_BACK, "error rate 8.0%"),
    # a stable version with too few requests: the baseline is 0
    (READY, fig(400, 60), fig(50, 25), 111, Verdict.ROLL_BACK, "stable version's 0.0%"),
    # latency: every request +300 ms rolls back, +150 ms does not
    (READY, slow_fig(100, 320, 1.0), STABLE, 101, Verdict.ROLL_BACK, "100 of 100 requests"),
    (READY, slow_fig(100, 170, 1.0), STABLE, 111, Verdict.ADVANCE, "within"),
    # a few slow requests make a p99 over the margin, but not enough evidence
    (READY, slow_fig(200, 900, 0.03), STABLE, 111, Verdict.ADVANCE, "within"),
    (READY, slow_fig(200, 900, 0.30), STABLE, 111, Verdict.ROLL_BACK, "60 of 200"),
    # latency is not judged against a stable version with too few requests
    (READY, fig(100, p99=900), fig(10, p99=20), 111, Verdict.ADVANCE, "within"),
])
def test_judge(step: Step, canary: Figures, stable: Figures, now: float,  # noqa: PLR0917
               verdict: Verdict, words: str) -> None:
    decision = judge(RULES, step, canary, stable, now)
    assert decision.verdict is verdict, decision.reason
    assert words in decision.reason


def test_wilson_bound() -> None:
    assert wilson_low(0, 100) == 0.0
    assert wilson_low(0, 0) == 0.0
    low = wilson_low(20, 100)
    assert 0.10 < low < 0.20
    assert wilson_low(200, 1000) > low  # more evidence, tighter bound


def test_weights() -> None:
    assert weights(RULES, None) == (100, 0)
    assert weights(RULES, 0) == (90, 10)
    assert weights(RULES, 2) == (0, 100)


@pytest.mark.parametrize("bad", [
    {"steps": (10, 50)}, {"steps": (50, 10, 100)}, {"steps": ()}, {"steps": (0, 100)},
    {"min_requests": 0}, {"error_margin": 2.0}, {"pause_s": -1}, {"ready_timeout_s": 0},
])
def test_rules_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"steps|rules"):
        Rules(**bad)  # type: ignore[arg-type]


def sample(rng: random.Random, n: int, error_rate: float, extra_ms: float = 0.0) -> Figures:
    """``n`` requests of a server whose latency is log-normal around 20 ms, through a Window."""
    window = Window(seconds=60)
    for i in range(n):
        latency = rng.lognormvariate(3.0, 0.5) + extra_ms
        window.record(100 + 10 * i / n, latency, rng.random() < error_rate)
    return window.figures(110.0)


def test_no_false_rollback_on_noise() -> None:
    """A good canary (the stable version's 1 % errors and latency) judged on its first
    100..300 requests, against a stable version's 900, is never rolled back in 400 tries."""
    rng = random.Random(7)
    stables = [sample(rng, 900, 0.01) for _ in range(10)]
    rollbacks = [d.reason for i in range(400)
                 if (d := judge(RULES, READY, sample(rng, rng.randint(100, 300), 0.01),
                                stables[i % 10], 111)).verdict is Verdict.ROLL_BACK]
    assert rollbacks == []


def test_slow_canary_caught() -> None:
    rng = random.Random(3)
    decision = judge(RULES, READY, sample(rng, 100, 0.0, extra_ms=300), sample(rng, 900, 0.0),
                     101)
    assert decision.verdict is Verdict.ROLL_BACK and "p99" in decision.reason


def test_bad_canary_caught_at_minimum_sample() -> None:
    """A 20 % error canary is rolled back at the first judgement with the minimum sample in
    nearly every window (the bound needs ~12 % observed over 100 requests)."""
    rng = random.Random(11)
    caught = 0
    for _ in range(500):
        errors = sum(rng.random() < 0.20 for _ in range(100))
        caught += judge(RULES, READY, fig(100, errors), STABLE, 101).verdict is Verdict.ROLL_BACK
    assert caught >= 490
