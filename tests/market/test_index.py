"""The vectorised ``OfferIndex`` answers exactly like the reference matcher ``core.match``."""

from __future__ import annotations

import random
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st

from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.core.match import Match, match
from bourse.core.offer import Offer
from bourse.market.catalogs import catalog_offers
from bourse.market.index import OfferIndex

DRIVERS = [None, "470.82.01", "515.65.01", "525.60.13", "535.104.05", "550.54.14",
           "570.124.04", "590.48.01"]
TAGS = ["hipaa", "soc2", "gdpr", "eu-only"]
NODE_GPUS = [("a100-40gb", 40960), ("a100-80gb", 81920), ("h100-80gb", 81559), ("l40s", 46068),
             ("rtx-4090", 24564), ("v100-16gb", 16384), ("t4", 15360), ("mi300x", 196608)]
REGIONS = [("us-east-1", "us-east-1a"), ("us-west-2", "us-west-2b"), ("eu-west-1", None),
           ("eu-central-1", "eu-central-1a"), ("asia-northeast1", "asia-northeast1-a")]


def synthetic_offers(seed: int = 7, n: int = 240) -> list[Offer]:
    """Node and market offers with drivers, tags, availability, SLA, ties and divisible slices."""
    rng = random.Random(seed)
    offers = []
    for i in range(n):
        gpu, memory = rng.choice([*NODE_GPUS, (None, None)])
        region, zone = rng.choice(REGIONS)
        divisible = rng.random() < 0.3
        count = 0 if gpu is None else rng.choice([1, 2, 4, 8])
        price = rng.choice([None, 0.5, 1.0, 1.0, 2.0, 2.5, 4.0, 8.0, 16.0])
        spot = rng.choice([None, None, 0.25, 0.5, 1.0, 3.0])
        if price is None and spot is None:
            price = 1.0
        offers.append(Offer(
            id=f"syn/{i:03d}", provider=rng.choice(["nodes", "node-eu", "aws", "vast"]),
            instance_type=f"t{i % 7}", region=region, zone=zone, gpu=gpu, gpu_count=count,
            gpu_memory_mib=memory, cpus=rng.choice([None, 4.0, 8.0, 32.0, 128.0]),
            memory_gib=rng.choice([None, 16.0, 64.0, 512.0]),
            disk_gib=rng.choice([None, 50.0, 200.0, 2000.0]),
            price=price, spot_price=spot, driver=rng.choice(DRIVERS),
            available=rng.choice([None, 0, 1, 2, 5]), sla=rng.choice([None, 0.9, 0.99]),
            tags=frozenset(rng.sample(TAGS, rng.randint(0, 2))), divisible=divisible,
            price_is_floor=rng.random() < 0.1,
            source="node" if divisible or rng.random() < 0.3 else "catalog",
            node_id=f"n{i}" if divisible else None,
            engines=rng.choice([None, frozenset(), frozenset({"docker"}),
                                frozenset({"podman", "nvidia-container-cli"})]),
        ))
    return offers


@cache
def catalog_index() -> OfferIndex:
    return OfferIndex(catalog_offers())


@cache
def mixed() -> tuple[tuple[Offer, ...], OfferIndex]:
    offers = (*catalog_offers(), *synthetic_offers())
    return offers, OfferIndex(offers)


def summary(found: list[Match]) -> list[tuple[str, float, bool]]:
    return [(m.offer.id, m.price, m.spot) for m in found]


HAND_PICKED: list[tuple[dict[str, Any], int]] = [
    ({"gpu": "a100-40gb"}, 10),
    ({"gpu": "a100"}, 20),
    ({"gpu": "a100:8"}, 10),
    ({"gpu": "h100|a100-80gb:8", "spot": "prefer"}, 15),
    ({"gpu": "h100:8", "spot": "only", "max_price": 30}, 10),
    ({"gpu": "24GB..80GB:2"}, 25),
    ({"gpu": "40GB+", "max_price": 3}, 10),
    ({"gpu": "cpu"}, 10),
    ({}, 50),
    ({"gpus": 4}, 10),
    ({"gpu": "l4|t4", "regions": "us-*", "spot": "prefer"}, 10),
    ({"gpu": "t4", "regions": "us-central1-a"}, 10),  # a zone
    ({"gpu": "h100", "exclude_providers": "vast,runpod", "cpus": "32+"}, 10),
    ({"gpu": "a100-80gb", "providers": "aws,gcp", "exclude_regions": "us-east-*"}, 10),
    ({"gpu": "rtx4090", "max_price": 0.5}, 30),
    ({"gpu": "h100-80gb", "torch": "2.1", "memory": "256GB+"}, 10),
    ({"gpu": "v100", "cuda": ">=13.0"}, 10),
    ({"gpu": "v100", "torch": "2.13"}, 10),
    ({"gpu": "l40s", "disk": "500GB", "num_nodes": 2}, 10),
    ({"gpu": "h200:8", "spot": "prefer", "max_price": 100}, 5),
    ({"gpu": "mi300x"}, 10),
    ({"gpu": "b200", "max_price": 0.01}, 10),
    ({"gpu": "a100", "tags": "hipaa"}, 10),
    ({"image": "python:3.12", "cpus": "8+"}, 20),
    ({"gpu": "rtx4090", "image": "pytorch/pytorch:2.1.0", "torch": "2.1"}, 20),
    ({"min_reliability": 0.95}, 20),  # the measured nodes only: no catalogue offer has one
    ({"gpu": "a100", "min_reliability": "90%"}, 10),
]


@pytest.mark.parametrize(("kwargs", "limit"), HAND_PICKED)
def test_index_equals_reference_on_catalogs(kwargs: dict[str, Any], limit: int) -> None:
    compute = Compute(**kwargs)
    offers = catalog_offers()
    expected = summary(match(compute, offers, limit))
    assert summary(catalog_index().match(compute, limit)) == expected


@pytest.mark.parametrize(("kwargs", "limit"), HAND_PICKED)
def test_index_equals_reference_with_node_offers(kwargs: dict[str, Any], limit: int) -> None:
    compute = Compute(**kwargs)
    offers, index = mixed()
    assert summary(index.match(compute, limit)) == summary(match(compute, offers, limit))


def test_hand_picked_queries_are_not_trivial() -> None:
    found = [len(match(Compute(**kwargs), catalog_offers(), limit)) for kwargs, limit in
             HAND_PICKED]
    assert sum(1 for n in found if n) >= 15
    assert 0 in found  # and some match nothing


GPU_LABELS = ["cpu", "a100", "a100-40gb", "a100-80gb", "h100", "h100|a100-80gb", "l4|t4",
              "rtx4090", "v100", "mi300x", "h200", "b200", "l40s", "24GB..80GB", "40GB+",
              "..24GB", "a100|40GB+", "l40s|rtx-4090|16GB..48GB"]
OPTIONAL: dict[str, list[Any]] = {
    "cpus": ["8+", "..32", "16..64", 4],
    "memory": ["64GB+", "..256GB", "32GB..1TB"],
    "disk": ["100GB+", "1TB+"],
    "max_price": [0.3, 1, 2, 5, 20, 60],
    "regions": ["us-*", "*east*", "us-east-1a", "eu-*,asia-*", "CA,US"],
    "exclude_regions": ["us-west-*", "*-1"],
    "providers": ["aws", "gcp,lambda", "r*", "node*,vast"],
    "exclude_providers": ["vast", "runpod,cudo"],
    "torch": ["2.1", "2.13", "1.12"],
    "cuda": [">=12.1", "11.8", "13.0"],
    "num_nodes": [2],
    "min_reliability": [0.9, 0.95, "99%"],
}


def maybe(choices: list[Any], none: int) -> st.SearchStrategy[Any]:
    """One of ``choices``, or None ``none`` times as often as each choice."""
    return st.sampled_from([None] * (none * len(choices)) + choices)


@st.composite
def computes(draw: st.DrawFn) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    label = draw(st.one_of(st.none(), st.sampled_from(GPU_LABELS)))
    count = draw(maybe([1, 2, 4, 8], 1))
    if label is not None:
        kwargs["gpu"] = label if count is None or label == "cpu" else f"{label}:{count}"
    elif count is not None:
        kwargs["gpus"] = count
    for name, choices in OPTIONAL.items():
        value = draw(maybe(choices, 4))
        if value is not None:
            kwargs[name] = value
    kwargs["spot"] = draw(st.sampled_from(["never", "prefer", "only"]))
    tags = draw(st.lists(st.sampled_from([*TAGS, "pci-dss"]), max_size=2, unique=True))
    if tags and draw(st.integers(0, 3)) == 0:
        kwargs["tags"] = tags
    return kwargs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kwargs=computes(), limit=st.sampled_from([1, 3, 10, 40]))
def test_index_equals_reference_property(kwargs: dict[str, Any], limit: int) -> None:
    try:
        compute = Compute(**kwargs)
    except InvalidInput:
        reject()  # e.g. a CUDA floor without a GPU, or a region both required and excluded
    offers, index = mixed()
    expected = summary(match(compute, offers, limit))
    event("matches" if expected else "no match")
    assert summary(index.match(compute, limit)) == expected


def test_index_explain_is_the_reference_explain() -> None:
    offers, index = mixed()
    compute = Compute("a100-40gb:2", max_price=1)
    result = index.explain(compute)
    assert result.total == len(offers)
    assert result.matched == len(match(compute, offers))


def test_repeated_tag_means_the_same_as_once() -> None:
    offers, index = mixed()
    compute = Compute(tags=["hipaa", "hipaa"])
    expected = summary(match(compute, offers, 10))
    assert expected
    assert summary(index.match(compute, 10)) == expected


def test_repeated_model_id_returns_each_offer_once() -> None:
    compute = Compute(gpu={"models": ["a100-40gb", "a100-40gb"]})
    expected = summary(match(compute, catalog_offers(), 6))
    assert expected
    assert summary(catalog_index().match(compute, 6)) == expected


DATA_REGIONS = [None, "us-east-1", "eu-west-1", "us-west-2b", "CA-MTL-1", "nowhere-1"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kwargs=computes(), limit=st.sampled_from([1, 3, 10, 40]),
       data_region=st.sampled_from(DATA_REGIONS))
def test_index_equals_reference_near_the_data(kwargs: dict[str, Any], limit: int,
                                              data_region: str | None) -> None:
    try:
        compute = Compute(**kwargs)
    except InvalidInput:
        reject()
    offers, index = mixed()
    expected = summary(match(compute, offers, limit, data_region=data_region))
    assert summary(index.match(compute, limit, data_region=data_region)) == expected


@pytest.mark.parametrize("data_region", ["EU-CZ-1", "CZ"])
def test_same_region_offers_win_ties_on_the_catalogues(data_region: str) -> None:
    compute = Compute("a100-80gb:8")
    plain = catalog_index().match(compute, 6)
    near = catalog_index().match(compute, 6, data_region=data_region)
    assert [m.price for m in near] == [m.price for m in plain]  # the price still decides
    assert "EU-CZ-1" not in [m.offer.zone for m in plain]
    tied = [m for m in near if m.price == near[3].price]
    assert tied[0].offer.zone == "EU-CZ-1"  # ahead of the others at the same price
    assert summary(near) == summary(match(compute, catalog_offers(), 6, data_region=data_region))
