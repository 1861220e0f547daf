"""Pure rules of spot recovery, as tables: retry policy, blocklist tiers, lost work and
on-demand cost, preemption outcomes, durations."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bourse.core.blocklist import NODE_TTL_S, SCOPE_TTL_S, add_failure, tiers
from bourse.core.cost import lost_work, on_demand_cost
from bourse.core.errors import InvalidInput
from bourse.core.offer import Offer
from bourse.core.retry import RetryPolicy, cause_of, decide
from bourse.core.states import AttemptState, check_attempt, under_notice
from bourse.core.units import parse_duration


@pytest.mark.parametrize(("cause", "used", "retry", "limit"), [
    ("preemption", 0, True, 100), ("preemption", 99, True, 100), ("preemption", 100, False, 100),
    ("node_loss", 2, True, 3), ("node_loss", 3, False, 3),
    ("failure", 0, False, 0),
])
def test_default_policy(cause: str, used: int, retry: bool, limit: int) -> None:
    decision = decide(RetryPolicy(), 3, {cause: used}, cause, now=10.0)  # type: ignore[arg-type]
    assert (decision.retry, decision.limit) == (retry, limit)
    assert decision.not_before is None


@pytest.mark.parametrize(("used", "not_before"), [(0, 12.0), (1, 14.0), (2, 18.0), (5, 40.0)])
def test_backoff_doubles_up_to_its_cap(used: int, not_before: float) -> None:
    policy = RetryPolicy(on_failure=10, backoff_s=2, backoff_max_s=30)
    assert decide(policy, 3, {"failure": used}, "failure", now=10.0).not_before == not_before


@pytest.mark.parametrize("bad", [{"on_preemption": -1}, {"backoff_s": float("inf")},
                                 {"on_failure": "x"}, {"unknown": 1}])
def test_policy_is_validated(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        RetryPolicy.model_validate(bad)


def test_causes() -> None:
    assert [cause_of(s) for s in (AttemptState.PREEMPTED, AttemptState.LOST,
                                  AttemptState.FAILED, AttemptState.SUCCEEDED)] == [
        "preemption", "node_loss", "failure", None]


@pytest.mark.parametrize(("outcome", "ends"), [
    (AttemptState.FAILED, AttemptState.PREEMPTED), (AttemptState.LOST, AttemptState.PREEMPTED),
    (AttemptState.SUCCEEDED, AttemptState.SUCCEEDED),
    (AttemptState.CANCELLED, AttemptState.CANCELLED)])
def test_under_notice(outcome: AttemptState, ends: AttemptState) -> None:
    assert under_notice(outcome) is ends
    assert check_attempt(AttemptState.RUNNING, ends) is ends


@pytest.mark.parametrize(("outcome", "ends"), [
    (AttemptState.SUCCEEDED, AttemptState.PREEMPTED),  # exit 0 after the notice's SIGTERM
    (AttemptState.FAILED, AttemptState.PREEMPTED),
    (AttemptState.CANCELLED, AttemptState.CANCELLED)])
def test_an_exit_after_the_notices_sigterm_is_no_success(outcome: AttemptState,
                                                         ends: AttemptState) -> None:
    assert under_notice(outcome, stopped=True) is ends


def offer(node: str, provider: str, region: str) -> Offer:
    return Offer(id=node, provider=provider, instance_type="n", region=region, gpu=None,
                 gpu_count=0, gpu_memory_mib=None, cpus=4, memory_gib=8, price=1.0,
                 node_id=node, source="node")


OFFERS = [offer("a", "acme", "eu"), offer("b", "acme", "us"), offer("c", "zeta", "eu"),
          offer("d", "zeta", "us")]


def ids(found: list[list[Offer]]) -> list[list[str]]:
    return [[o.id for o in tier] for tier in found]


def test_tiers_avoid_node_then_provider_and_region_then_fall_back() -> None:
    blocks = add_failure([], 100.0, node="a", provider="acme", region="eu")
    assert ids(tiers(OFFERS, blocks, 101.0)) == [["d"], ["b", "c", "d"], ["a", "b", "c", "d"]]
    assert ids(tiers(OFFERS[:2], blocks, 101.0)) == [["b"], ["a", "b"]]  # acme/eu fallback
    later = 100.0 + SCOPE_TTL_S + 1  # the provider and region expired, the node not yet
    assert ids(tiers(OFFERS, blocks, later)) == [["b", "c", "d"], ["a", "b", "c", "d"]]
    assert ids(tiers(OFFERS, blocks, 100.0 + NODE_TTL_S + 1)) == [["a", "b", "c", "d"]]


def test_failures_accumulate_and_expired_entries_go() -> None:
    blocks = add_failure([], 0.0, node="a", provider=None, region=None)
    blocks = add_failure(blocks, NODE_TTL_S + 1, node="b", provider="p", region=None)
    assert [(e.kind, e.value) for e in blocks] == [("node", "b"), ("provider", "p")]


@pytest.mark.parametrize(("started", "stopped", "checkpoint", "notice", "lost"), [
    (100.0, 200.0, 180.0, None, 20.0),  # since the last checkpoint
    (100.0, 200.0, None, None, 100.0),  # none: the whole attempt
    (100.0, 200.0, 50.0, None, 100.0),  # one from an earlier attempt kept nothing of this one
    (100.0, 200.0, 201.0, None, 0.0),   # saved just before the end was recorded
    (100.0, 200.0, 180.0, 150.0, 0.0),  # saved on the notice: the rest was shutting down
    (100.0, 200.0, 140.0, 150.0, 60.0),  # not saved since the notice: all since then is lost
    (100.0, 200.0, None, 150.0, 100.0),
    (None, 200.0, None, None, None), (100.0, None, None, None, None)])
def test_lost_work(started: float | None, stopped: float | None, checkpoint: float | None,
                   notice: float | None, lost: float | None) -> None:
    assert lost_work(started, stopped, checkpoint, notice) == lost


def test_on_demand_cost_counts_useful_work_only() -> None:
    assert on_demand_cost(3.6, billed=100.0, lost=40.0) == pytest.approx(0.06)
    assert on_demand_cost(None, 100.0, None) is None


@pytest.mark.parametrize(("text", "seconds"), [("30", 30.0), ("30s", 30.0), ("2m", 120.0),
                                               ("1.5h", 5400.0), (" 7d ", 604800.0),
                                               ("250ms", 0.25), (12, 12.0)])
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "soon", "-1s", "3 weeks", "1e400"])
def test_bad_durations(bad: str) -> None:
    with pytest.raises(InvalidInput, match="duration"):
        parse_duration(bad, field="--notice")
