"""``launcher.decide``: a live launch's next step, and the places a job tries, as tables."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bourse.core.compute import Compute
from bourse.core.launch import Failure, blocks_for
from bourse.core.match import match
from bourse.core.states import LaunchState, NodeState
from bourse.market.catalogs import catalog_offers
from bourse.server.launcher.decide import Facts, Member, broken_gang, candidates, verdict

T0 = 1000.0
BOOT, IDLE = 900.0, 600.0


def facts(**given: object) -> Facts:
    base: dict[str, object] = {"state": LaunchState.BOOTING, "requested_at": T0,
                               "node_state": NodeState.BOOTING, "verification": "unverified"}
    return Facts(**(base | given))  # type: ignore[arg-type]


@pytest.mark.parametrize(("given", "now", "step", "block", "says"), [
    ({}, T0 + 10, "wait", False, ""),
    ({"node_state": NodeState.ONLINE, "verification": "pass"}, T0 + 10, "ready", False, ""),
    ({"node_state": NodeState.ONLINE, "verification": "unverified"}, T0 + 10, "wait", False,
     ""),
    ({"verification": "fail", "failed_checks": "measured H100"}, T0 + 10, "terminate", True,
     "not what the offer said: measured H100"),
    ({}, T0 + BOOT + 1, "terminate", True, "boot timeout"),
    ({"job_ended": True}, T0 + 10, "terminate", False, "ended before it booted"),
    ({"job_ended": True, "enrolled": True}, T0 + 10, "wait", False, ""),
    ({"node_state": None}, T0, "terminate", False, "node row is gone"),
    ({"state": LaunchState.TERMINATING}, T0, "terminate", False, "terminating"),
    ({"state": LaunchState.READY, "node_state": NodeState.ONLINE, "active": 1}, T0, "busy",
     False, ""),
    ({"state": LaunchState.READY, "node_state": NodeState.ONLINE}, T0, "idle", False, ""),
    ({"state": LaunchState.READY, "node_state": NodeState.ONLINE, "idle_since": T0},
     T0 + IDLE, "terminate", False, "idle timeout"),
    ({"state": LaunchState.READY, "node_state": NodeState.LOST, "active": 1}, T0, "terminate",
     False, "lost"),
    ({"state": LaunchState.READY, "node_state": NodeState.RECLAIMED, "active": 1}, T0, "busy",
     False, ""),  # its jobs checkpoint first
    ({"state": LaunchState.READY, "node_state": NodeState.RECLAIMED}, T0, "terminate", True,
     "reclaimed"),
])
def test_verdicts(given: dict[str, object], now: float, step: str, block: bool,
                  says: str) -> None:
    found = verdict(facts(**given), now, boot_timeout_s=BOOT, idle_timeout_s=IDLE)
    assert (found.step, found.block) == (step, block)
    assert says in found.reason


def test_unverified_nodes_are_ready_when_the_exchange_allows_them() -> None:
    found = verdict(facts(node_state=NodeState.ONLINE, needs_verification=False), T0,
                    boot_timeout_s=BOOT, idle_timeout_s=IDLE)
    assert found.step == "ready"


def test_prefer_tries_spot_then_on_demand_by_price_less_the_blocked() -> None:
    offers = [o for o in catalog_offers(("aws",)) if o.region == "us-east-1"]
    compute = Compute(gpu="a100:8", spot="prefer")
    spot = match(compute, offers)
    on_demand = match(compute.model_copy(update={"spot": "never"}), offers)
    first = spot[0]
    blocks = blocks_for(Failure.CAPACITY, first.offer, True, 0.0, "none left")
    tries, blocked = candidates(compute, spot, on_demand, blocks=blocks, now=1.0)
    assert [m.price for m in tries] == sorted(m.price for m in tries)
    assert {(m.offer.id, m.spot) for m in blocked} == {(first.offer.id, True)}
    assert any(not m.spot and m.offer.id == first.offer.id for m in tries)  # its on-demand side
    assert len({(m.offer.id, m.spot) for m in tries}) == len(tries)
    never, _ = candidates(Compute(gpu="a100:8"), on_demand, spot, blocks=[], now=1.0)
    assert all(not m.spot for m in never)
    nowhere, _ = candidates(compute, spot, on_demand, blocks=[], now=1.0, clouds=["gcp"])
    assert nowhere == []


R, B, Y = LaunchState.REQUESTED, LaunchState.BOOTING, LaunchState.READY
F, T = LaunchState.FAILED, LaunchState.TERMINATED


@pytest.mark.parametrize(("states", "busy", "ending", "ended"), [
    ((B, B), (), (), []),  # on its way up
    ((Y, Y), (), (), []),  # up whole
    ((Y, F), (), (), []),  # up whole once: members are nodes of their own now
    ((B, F), (), (), ["l0"]),  # a crash between members: the one made goes
    ((R, B, F), (), (), ["l0", "l1"]),
    ((B, B), (), ("l1",), ["l0"]),  # one ends now (boot timeout, not what it said)
    ((Y, B, T), (), (), ["l0", "l1"]),  # the ready one too: no gang can run on them
    ((Y, B, T), ("l0",), (), ["l1"]),  # work runs on it: it stays
])
def test_a_gang_that_never_came_up_whole_ends_whole(
        states: tuple[LaunchState, ...], busy: tuple[str, ...], ending: tuple[str, ...],
        ended: list[str]) -> None:
    members = [Member(f"l{i}", state, busy=f"l{i}" in busy) for i, state in enumerate(states)]
    assert broken_gang(members, set(ending)) == ended


def test_a_gangs_places_have_a_zone() -> None:
    offers = [o for o in catalog_offers(("aws",)) if o.region == "us-east-1"]
    zoneless = [replace(o, id=f"{o.id}-anywhere", zone=None) for o in offers]
    compute = Compute(gpu="a100:8", num_nodes=2)
    found = match(compute, [*offers, *zoneless])
    tries, _ = candidates(compute, found, [], blocks=[], now=1.0)
    assert tries and all(m.offer.zone is not None for m in tries)
    one, _ = candidates(Compute(gpu="a100:8"), match(Compute(gpu="a100:8"), zoneless), [],
                        blocks=[], now=1.0)
    assert one  # a one-node job takes a zone-less offer


def test_at_one_price_the_cloud_that_delivered_more_launches_is_tried_first() -> None:
    [offer] = [o for o in catalog_offers(("aws",)) if o.region == "us-east-1"
               and o.instance_type == "p4d.24xlarge" and o.zone is not None][:1]
    shaky = replace(offer, id="a-shaky", sla=0.5)  # sorts first by id
    sure = replace(offer, id="z-sure", provider="lambda", sla=0.98)
    unmeasured = replace(offer, id="m-new", provider="kubernetes", sla=None)
    compute = Compute(gpu="a100:8", spot="never")
    tries, _ = candidates(compute, match(compute, [shaky, unmeasured, sure]), [], blocks=[],
                          now=1.0)
    assert [m.offer.id for m in tries] == ["z-sure", "a-shaky", "m-new"]
    cheaper = replace(unmeasured, id="m-cheap", price=offer.price - 1.0)  # price comes first
    tries, _ = candidates(compute, match(compute, [sure, cheaper]), [], blocks=[], now=1.0)
    assert [m.offer.id for m in tries] == ["m-cheap", "z-sure"]
