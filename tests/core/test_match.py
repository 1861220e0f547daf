"""The reference matcher: each constraint, the ranking, and ``explain``, on hand-built offers."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from bourse.core.compute import Compute
from bourse.core.constraints import CONSTRAINTS, first_lack, lacks
from bourse.core.errors import InvalidInput
from bourse.core.match import explain, match
from bourse.core.offer import Offer

BASE = Offer(
    id="base", provider="aws", instance_type="p4d.x", region="us-east-1", gpu="a100-40gb",
    gpu_count=1, gpu_memory_mib=40960, cpus=8, memory_gib=64, price=2.0,
)


def offer(**changes: Any) -> Offer:
    return replace(BASE, **changes)


def node(**changes: Any) -> Offer:
    """A live node's free capacity: divisible, sold by share."""
    return replace(BASE, source="node", divisible=True, node_id="n1", **changes)


def failing(compute: Compute, o: Offer) -> set[str]:
    return {name for name, _ in lacks(compute, o)}


# (compute, offer, the constraints it must fail: empty = it matches)
Case = tuple[Compute, Offer, set[str]]

GPU_CASES: list[Case] = [
    (Compute("a100"), offer(gpu="a100-80gb", gpu_memory_mib=81920), set()),
    (Compute("a100"), offer(), set()),
    (Compute("a100-40gb"), offer(gpu="a100-80gb", gpu_memory_mib=81920), {"gpu"}),
    (Compute("h100|a100-80gb"), offer(gpu="a100-80gb", gpu_memory_mib=81920), set()),
    (Compute("h100|a100-80gb"), offer(gpu="h100-nvl", gpu_memory_mib=95830), set()),
    (Compute("h100|a100-80gb"), offer(), {"gpu"}),
    (Compute("40GB+"), offer(gpu="rtx-4090", gpu_memory_mib=24564), {"gpu_memory"}),
    (Compute("cpu"), offer(), set()),
    (Compute(), offer(gpu=None, gpu_count=0, gpu_memory_mib=None), set()),
]

COUNT_CASES: list[Case] = [
    (Compute("a100:2"), offer(gpu_count=2), set()),
    (Compute("a100:2"), offer(gpu_count=1), {"gpu_count"}),
    (Compute("a100:2"), offer(gpu_count=4), {"gpu_count"}),  # whole instances: exact
    (Compute("a100:2"), node(gpu_count=4), set()),  # divisible: at least
    (Compute("a100:2"), node(gpu_count=2), set()),
    (Compute("a100:2"), node(gpu_count=1), {"gpu_count"}),
    (Compute("a100", gpus=8), offer(gpu_count=8), set()),
]

MEMORY_CASES: list[Case] = [
    (Compute("40GB+"), offer(), set()),
    (Compute(gpu_memory="40GB+"), offer(), set()),
    (Compute("24GB..40GB"), offer(gpu="a100-80gb", gpu_memory_mib=81920), {"gpu_memory"}),
    (Compute("24GB..40GB"), offer(gpu="rtx-4090", gpu_memory_mib=24564), {"gpu_memory"}),
    (Compute("23GB..40GB"), offer(gpu="rtx-4090", gpu_memory_mib=24564), set()),
    (Compute("80GB+"), offer(gpu="a100-80gb", gpu_memory_mib=None), set()),  # from the table
    (Compute("80GB+"), offer(gpu_memory_mib=None), {"gpu_memory"}),
    (Compute("a100|80GB+"), offer(), {"gpu_memory"}),
]

PLACE_CASES: list[Case] = [
    (Compute(providers="aws"), offer(), set()),
    (Compute(providers="gcp"), offer(), {"provider"}),
    (Compute(providers="a*"), offer(provider="azure"), set()),
    (Compute(providers="aws,gcp"), offer(provider="gcp"), set()),
    (Compute(exclude_providers="vast"), offer(provider="vast"), {"provider"}),
    (Compute(exclude_providers="v*"), offer(), set()),
    (Compute(regions="us-*"), offer(), set()),
    (Compute(regions="us-*"), offer(region="eu-west-1"), {"region"}),
    (Compute(regions="eu-*,us-east-1"), offer(), set()),
    (Compute(regions="us-east-1a"), offer(zone="us-east-1a"), set()),  # a zone names a place
    (Compute(regions="us-east-1a"), offer(zone="us-east-1b"), {"region"}),
    (Compute(regions="us-east-1a"), offer(), {"region"}),
    (Compute(exclude_regions="us-east-*"), offer(zone="us-east-1a"), {"region"}),
    (Compute(exclude_regions="us-east-*"), offer(region="us-west-2"), set()),
    (Compute(regions="*-1a", exclude_regions="us-*"), offer(zone="us-east-1a"), {"region"}),
    (Compute(regions="*-1a", exclude_regions="us-*"),
     offer(region="eu-west-1", zone="eu-west-1a"), set()),
    (Compute(tags="hipaa"), offer(tags=frozenset({"hipaa", "soc2"})), set()),
    (Compute(tags="hipaa"), offer(tags=frozenset({"soc2"})), {"tags"}),
    (Compute(tags="hipaa,soc2"), offer(tags=frozenset({"hipaa"})), {"tags"}),
    (Compute(tags="hipaa"), offer(), {"tags"}),
]

SIZE_CASES: list[Case] = [
    (Compute(cpus=8), offer(), set()),
    (Compute(cpus=16), offer(), {"cpus"}),
    (Compute(cpus="..4"), offer(), {"cpus"}),
    (Compute(cpus="4..8"), offer(), set()),
    (Compute(cpus=8), offer(cpus=None), {"cpus"}),  # unknown is not enough
    (Compute(memory="64GB"), offer(), set()),
    (Compute(memory="128GB"), offer(), {"memory"}),
    (Compute(memory="32GB"), offer(memory_gib=None), {"memory"}),
    (Compute(disk="100GB"), offer(), set()),  # catalogue instance: disk sized on provisioning
    (Compute(disk="100GB"), offer(disk_gib=200), set()),
    (Compute(disk="100GB"), offer(disk_gib=50), {"disk"}),
    (Compute(disk="100GB"), node(), {"disk"}),  # a live node with unknown disk
    (Compute(disk="100GB"), node(disk_gib=500), set()),
    (Compute(disk="100GB"), replace(offer(), source="node"), {"disk"}),
]

SPOT_CASES: list[Case] = [
    (Compute(spot="never"), offer(price=None, spot_price=1.0), {"spot"}),
    (Compute(spot="never"), offer(spot_price=1.0), set()),
    (Compute(spot="prefer"), offer(price=None, spot_price=1.0), set()),
    (Compute(spot="prefer"), offer(), set()),
    (Compute(spot="only"), offer(), {"spot"}),
    (Compute(spot="only"), offer(price=None, spot_price=1.0), set()),
    (Compute(max_price=1.5), offer(), {"max_price"}),
    (Compute(max_price=2), offer(), set()),  # the ceiling is inclusive
    (Compute(max_price=1.5, spot="prefer"), offer(spot_price=1.0), set()),
    (Compute(max_price=1.5, spot="never"), offer(spot_price=1.0), {"max_price"}),
    (Compute(max_price=0.5, spot="only"), offer(spot_price=1.0), {"max_price"}),
    (Compute("a100:2", max_price=5), node(gpu_count=8, price=16.0), set()),  # pays 2/8
    (Compute("a100:2", max_price=3), node(gpu_count=8, price=16.0), {"max_price"}),
]

ENV_CASES: list[Case] = [
    (Compute("a100", torch="2.1"), offer(driver="470.82.01"), {"environment"}),
    (Compute("a100", torch="2.1"), offer(driver="535.104.05"), set()),
    (Compute("a100", torch="2.1"), offer(), set()),  # driver installed at provisioning
    (Compute("a100", cuda=">=12.1"), offer(driver="525.85.12"), {"environment"}),
    (Compute("a100", cuda=">=12.1"), offer(driver="530.30.02"), set()),
    (Compute("v100", cuda=">=13.0"), offer(gpu="v100-16gb", gpu_memory_mib=16384),
     {"environment"}),
    (Compute("v100", torch="2.13"), offer(gpu="v100-16gb", gpu_memory_mib=16384), set()),
    (Compute(torch="2.1"), offer(driver="470.82.01"), set()),  # CPU job: no CUDA needed
]

DOCKER, GPU_DOCKER = frozenset({"docker"}), frozenset({"docker", "nvidia-container-cli"})
IMAGE_CASES: list[Case] = [
    (Compute(image="python:3.12"), node(engines=frozenset()), {"image"}),
    (Compute(image="python:3.12"), node(engines=frozenset({"podman"})), set()),
    (Compute("a100", image="pytorch/pytorch"), node(engines=DOCKER), {"image"}),  # no toolkit
    (Compute("a100", image="pytorch/pytorch"), node(engines=GPU_DOCKER), set()),
    (Compute("a100", image="pytorch/pytorch"), offer(), set()),  # engine installed at start
    (Compute(), node(engines=frozenset()), set()),  # no image, no engine needed
    (Compute("a100", torch="2.1", image="x"), node(engines=GPU_DOCKER, driver="470.82.01"),
     {"environment"}),  # the image's torch still needs the driver
]

CAPACITY_CASES: list[Case] = [
    (Compute(), offer(available=0), {"capacity"}),
    (Compute(), offer(available=None), set()),
    (Compute(), offer(available=1), set()),
    (Compute(num_nodes=2), offer(available=1), {"capacity"}),
    (Compute(num_nodes=2), offer(available=2), set()),
    (Compute(num_nodes=2), node(available=1), set()),  # a node offer is one node
    (Compute(), node(available=0), {"capacity"}),
]


@pytest.mark.parametrize(
    ("compute", "o", "expected"),
    GPU_CASES + COUNT_CASES + MEMORY_CASES + PLACE_CASES + SIZE_CASES + SPOT_CASES + ENV_CASES
    + IMAGE_CASES + CAPACITY_CASES,
)
def test_constraint(compute: Compute, o: Offer, expected: set[str]) -> None:
    assert failing(compute, o) == expected
    matched = [m.offer for m in match(compute, [o])]
    assert matched == ([] if expected else [o])
    first = first_lack(compute, o)
    assert (first is None) == (not expected)


def test_gpu_request_rejects_cpu_offer() -> None:
    cpu = offer(gpu=None, gpu_count=0, gpu_memory_mib=None)
    assert first_lack(Compute("a100"), cpu) == ("gpu", "has no GPU")
    assert match(Compute("a100"), [cpu]) == []
    assert match(Compute(gpus=1), [cpu]) == []


def test_constraint_reasons_say_what_is_lacking() -> None:
    assert first_lack(Compute("a100:2"), offer()) == ("gpu_count", "has 1 GPUs, needs 2")
    reason = dict(lacks(Compute(max_price=1.5), offer()))["max_price"]
    assert "$2.00/h" in reason and "$1.50/h" in reason
    reason = dict(lacks(Compute("a100", torch="2.1"), offer(driver="470.82.01")))["environment"]
    assert reason == "driver 470.82.01 is too old for torch 2.1: needs driver >= 520.61.05 (cu118)"
    reason = dict(lacks(Compute("a100", image="img:1"), node(engines=DOCKER)))["image"]
    assert reason == ("no NVIDIA container toolkit (nvidia-container-cli) to give image img:1 "
                      "its GPUs")
    assert dict(lacks(Compute(image="img:1"), node(engines=frozenset())))["image"] == \
        "no container engine (docker or podman) to run image img:1"


# --- ranking -----------------------------------------------------------------------------------

def ids(compute: Compute, offers: list[Offer], limit: int | None = None) -> list[str]:
    return [m.offer.id for m in match(compute, offers, limit)]


def test_cheapest_first() -> None:
    offers = [offer(id="c", price=3.0), offer(id="a", price=1.0), offer(id="b", price=2.0)]
    assert ids(Compute(), offers) == ["a", "b", "c"]
    assert ids(Compute(), offers, 2) == ["a", "b"]
    assert [m.price for m in match(Compute(), offers)] == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("spot", "order", "paid", "is_spot"),
    [
        ("never", ["b", "a"], [1.0, 2.0], [False, False]),
        ("prefer", ["a", "b"], [0.5, 1.0], [True, False]),
        ("only", ["a"], [0.5], [True]),
    ],
)
def test_spot_price_ranks_when_spot_allowed(spot: str, order: list[str], paid: list[float],
                                            is_spot: list[bool]) -> None:
    offers = [offer(id="a", price=2.0, spot_price=0.5), offer(id="b", price=1.0)]
    found = match(Compute(spot=spot), offers)
    assert [m.offer.id for m in found] == order
    assert [m.price for m in found] == paid
    assert [m.spot for m in found] == is_spot


def test_complete_prices_before_lower_bounds() -> None:
    offers = [offer(id="floor", price=0.1, price_is_floor=True), offer(id="whole", price=5.0),
              offer(id="floor2", price=0.05, price_is_floor=True)]
    assert ids(Compute(), offers) == ["whole", "floor2", "floor"]


@pytest.mark.parametrize(
    ("offers", "order"),
    [
        ([offer(id="a", available=1), offer(id="b", available=3)], ["b", "a"]),
        ([offer(id="a"), offer(id="b", available=1)], ["b", "a"]),
        ([offer(id="a", sla=0.9), offer(id="b", sla=0.99)], ["b", "a"]),
        ([offer(id="a", available=1, sla=0.99), offer(id="b", available=2, sla=0.5)],
         ["b", "a"]),
        ([offer(id="b"), offer(id="a"), offer(id="c")], ["a", "b", "c"]),
        ([offer(id="a", sla=0.9, price=2.5), offer(id="b", price=2.0)], ["b", "a"]),
    ],
)
def test_ties_by_availability_then_sla_then_id(offers: list[Offer], order: list[str]) -> None:
    assert ids(Compute(), offers) == order
    assert ids(Compute(), list(reversed(offers))) == order


def test_divisible_offer_is_priced_by_share() -> None:
    found = match(Compute("a100:2"), [node(gpu_count=8, price=16.0), offer(id="x", gpu_count=2,
                                                                         price=5.0)])
    assert [(m.offer.id, m.price) for m in found] == [("base", 4.0), ("x", 5.0)]


# --- explain -----------------------------------------------------------------------------------

TABLE = [
    offer(id="ok-cheap", price=1.0),
    offer(id="ok", price=1.8),
    offer(id="wrong-gpu", gpu="h100-80gb", gpu_memory_mib=81559, price=0.5),
    offer(id="wrong-gpu-and-dear", gpu="t4", gpu_memory_mib=15360, price=9.0),
    offer(id="two-gpus", gpu_count=2, price=1.0),
    offer(id="dear", price=3.0),
    offer(id="dearer", price=4.0),
    offer(id="gcp", provider="gcp", price=1.0),
    offer(id="spot-only", price=None, spot_price=0.2),
    offer(id="full", available=0, price=1.0),
    offer(id="old-driver", driver="470.82.01", price=1.0),
]


def test_explain_counts_add_up() -> None:
    compute = Compute("a100-40gb", max_price=2, torch="2.1", exclude_providers="gcp")
    result = explain(compute, TABLE)
    assert result.total == len(TABLE)
    assert result.matched == len(match(compute, TABLE)) == 2
    assert sum(n for _, n in result.removed) == result.total - result.matched
    assert dict(result.removed) == {
        "gpu": 2, "gpu_count": 1, "provider": 1, "spot": 1, "max_price": 2, "environment": 1,
        "capacity": 1,
    }
    order = [c.name for c in CONSTRAINTS]
    assert [name for name, _ in result.removed] == sorted(dict(result.removed), key=order.index)
    lines = result.lines()
    assert lines[0].startswith(f"{len(TABLE)} offers considered")
    assert "2 matched" in lines


def test_explain_nearest_lists_the_right_gpu_first() -> None:
    compute = Compute("a100-40gb", max_price=1)
    offers = [
        offer(id="h100-cheap", instance_type="h", gpu="h100-80gb", gpu_memory_mib=81559,
              price=0.5),
        offer(id="a100-3", instance_type="a3", price=3.0),
        offer(id="t4-cheapest", instance_type="t", gpu="t4", gpu_memory_mib=15360, price=0.1),
        offer(id="a100-2", instance_type="a2", price=2.0),
    ]
    result = explain(compute, offers, nearest=4)
    assert result.matched == 0
    assert [r.offer.id for r in result.nearest][:2] == ["a100-2", "a100-3"]
    assert {r.offer.id for r in result.nearest[2:]} == {"h100-cheap", "t4-cheapest"}
    assert result.nearest[0].lacks == (("max_price", "$2.00/h is above max_price $1.00/h"),)
    assert len(explain(compute, offers, nearest=1).nearest) == 1
    assert explain(compute, offers, nearest=0).nearest == ()


def test_explain_nearest_groups_alike_offers_of_one_instance_type() -> None:
    compute = Compute("a100-40gb", max_price=1)
    offers = [offer(id=f"p4d/{region}", region=region, price=2.0)
              for region in ("us-east-1", "us-west-2", "eu-west-1")]
    offers.append(offer(id="other", instance_type="a2", price=2.5))
    result = explain(compute, offers, nearest=5)
    assert [(r.offer.id, r.similar) for r in result.nearest] == [("p4d/eu-west-1", 2),
                                                                 ("other", 0)]
    assert dict(result.removed) == {"max_price": 4}


def _regional(offer_id: str, region: str, price: float, zone: str | None = None) -> Offer:
    return offer(id=offer_id, region=region, zone=zone, price=price)


def test_same_region_offers_rank_ahead_only_at_equal_price() -> None:
    offers = [_regional("a", "eu-west-1", 1.0), _regional("b", "us-east-1", 1.0),
              _regional("c", "us-west-2", 0.5), _regional("d", "us-east-2", 1.0,
                                                          zone="us-east-1x")]
    assert [m.offer.id for m in match(Compute(), offers)] == ["c", "a", "b", "d"]
    near = match(Compute(), offers, data_region="US-EAST-1")
    assert [m.offer.id for m in near] == ["c", "b", "a", "d"]  # cheaper c still first
    assert [m.offer.id for m in match(Compute(), offers, data_region="us-east-1x")] == [
        "c", "d", "a", "b"]  # a zone counts as the region


def test_explain_counts_cross_region_matches() -> None:
    offers = [_regional("a", "eu-west-1", 1.0), _regional("b", "us-east-1", 1.0)]
    result = explain(Compute(), offers, data_region="us-east-1")
    assert result.cross_region == 1
    assert any(line.startswith("cross-region: the data is in us-east-1; 1 of the 2")
               for line in result.lines())
    assert not any("cross-region" in line for line in explain(Compute(), offers).lines())


def test_min_reliability_keeps_the_measured_nodes_that_reach_it() -> None:
    need = Compute(min_reliability="99%")
    assert need.min_reliability == pytest.approx(0.99)
    assert first_lack(need, node(sla=0.995)) is None
    assert lacks(need, node(sla=0.95)) == [("reliability", "reliability 95.0%, needs 99.0%")]
    [(name, why)] = lacks(need, offer())  # a catalogue offer: nothing measured
    assert name == "reliability" and why.startswith("reliability not measured")
    assert "reliability >= 99.0%" in need.describe()
    steady, flaky = node(sla=0.999, id="steady"), node(sla=0.5, id="flaky")
    assert [m.offer.id for m in match(need, [flaky, steady])] == ["steady"]
    counted = explain(need, [flaky, steady, offer()]).lines()
    assert any("reliability" in line and "removed" in line for line in counted), counted


@pytest.mark.parametrize(("given", "said"), [
    ("abc", "share must be a number up to 1, or a percentage such as 99%"),
    (0, "must be above 0 and at most 1"), (1.5, "must be above 0 and at most 1"),
    ("150%", "must be above 0 and at most 1"), (True, "must be a number"),
    ([0.9], "expected a share such as 0.99 or 99%, got a list"),
])
def test_a_bad_min_reliability_is_refused_saying_why(given: Any, said: str) -> None:
    with pytest.raises(InvalidInput, match="min_reliability") as refused:
        Compute(min_reliability=given)
    assert said in str(refused.value) and refused.value.field == "min_reliability"
