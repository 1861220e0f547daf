"""The shipped public-cloud catalogues turned into Offers."""

from __future__ import annotations

import ast
import csv
from collections import Counter
from importlib import resources
from typing import Any

import pytest

from bourse.core.gpus import catalogue
from bourse.core.offer import Offer
from bourse.market.catalogs import PROVIDERS, catalog_offers

CATALOGS = resources.files("bourse").joinpath("data", "catalogs")


def rows(provider: str) -> list[dict[str, str]]:
    with CATALOGS.joinpath(f"{provider}.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def positive(text: str | None) -> bool:
    return bool(text and text.strip() and float(text) > 0)


def by_id() -> dict[str, Offer]:
    return {o.id: o for o in catalog_offers()}


def test_providers() -> None:
    assert set(PROVIDERS) == {"aws", "azure", "cudo", "fluidstack", "gcp", "lambda", "nebius",
                              "runpod", "vast"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_priced_gpu_row_becomes_an_offer(provider: str) -> None:
    expected = sum(1 for r in rows(provider) if (r["AcceleratorName"] or "").strip()
                   and (positive(r.get("Price")) or positive(r.get("SpotPrice"))))
    offers = [o for o in catalog_offers() if o.provider == provider]
    assert expected > 0
    assert len(offers) == expected
    assert len(catalog_offers((provider,))) == expected


def test_offers_are_well_formed() -> None:
    offers = catalog_offers()
    known = catalogue().models
    assert len(offers) > 4000
    assert all(o.gpu in known for o in offers)
    assert len({o.id for o in offers}) == len(offers)
    assert all(o.gpu_count >= 1 for o in offers)
    assert all(o.source == "catalog" and not o.divisible for o in offers)
    assert all(o.price is not None or o.spot_price is not None for o in offers)
    assert all(o.price is None or o.price > 0 for o in offers)
    assert all(o.spot_price is None or o.spot_price > 0 for o in offers)
    assert all(o.gpu_memory_mib and o.gpu_memory_mib > 0 for o in offers)


def test_repeated_rows_get_numbered_ids() -> None:
    ids = {o.id for o in catalog_offers()}
    assert "runpod/2x_B200_SECURE/US/US-CA-1" in ids
    assert "runpod/2x_B200_SECURE/US/US-CA-1#2" in ids
    assert "aws/p4de.24xlarge/us-east-1/use1-az4#2" in ids


def test_vast_zero_spot_prices_and_placeholder_shapes_are_unknown() -> None:
    vast = [o for o in catalog_offers() if o.provider == "vast"]
    assert {r["SpotPrice"] for r in rows("vast")} == {"0.00"}
    assert len(vast) == len(rows("vast"))
    assert all(o.spot_price is None for o in vast)
    assert all(o.cpus is None and o.memory_gib is None for o in vast)
    assert all(o.price is not None and o.price > 0 for o in vast)


def test_gcp_accelerator_rows_are_price_floors() -> None:
    gcp = [o for o in catalog_offers() if o.provider == "gcp"]
    assert all(not r["InstanceType"] for r in rows("gcp"))
    assert gcp
    assert all(o.price_is_floor for o in gcp)
    assert all(o.cpus is None and o.memory_gib is None for o in gcp)
    assert all(o.instance_type.endswith("(accelerator only)") for o in gcp)
    assert not any(o.price_is_floor for o in catalog_offers() if o.provider != "gcp")


SPOT_CHECKS: list[tuple[str, dict[str, Any]]] = [
    ("aws/p4d.24xlarge/ap-northeast-1/apne1-az4",
     {"instance_type": "p4d.24xlarge", "region": "ap-northeast-1", "zone": "apne1-az4",
      "gpu": "a100-40gb", "gpu_count": 8, "gpu_memory_mib": 40960, "cpus": 96.0,
      "memory_gib": 1152.0, "price": 44.92215, "spot_price": 14.052}),
    ("aws/p5.48xlarge/ap-northeast-1/apne1-az1",
     {"gpu": "h100-80gb", "gpu_count": 8, "price": 123.19496, "spot_price": 40.0976,
      "cpus": 192.0}),
    ("azure/Standard_NC6s_v3/centralus",
     {"gpu": "v100-16gb", "gpu_count": 1, "cpus": 6.0, "memory_gib": 112.0, "price": 3.458,
      "spot_price": 0.394212, "zone": None}),
    ("azure/Standard_NV16as_v4/eastus",
     {"gpu": "mi25", "gpu_count": 1, "price": 0.932, "spot_price": 0.10252}),
    ("cudo/epyc-genoa-h100-nvl-pcie_1x2v4gb/au-melbourne-1",
     {"gpu": "h100-nvl", "gpu_count": 1, "gpu_memory_mib": 96256, "cpus": 2.0,
      "memory_gib": 4.0, "price": 2.4994, "spot_price": None}),
    ("cudo/sapphire-rapids-h100_1x2v4gb/no-kristiansand-1",
     {"gpu": "h100-80gb", "gpu_count": 1, "price": 1.8214000000000001}),
    ("fluidstack/H100_PCIE_80GB::1/UTAH_USA",
     {"gpu": "h100-80gb", "gpu_count": 1, "cpus": 28.0, "memory_gib": 180.0, "price": 2.89,
      "spot_price": None}),
    ("gcp/A100 x1 (accelerator only)/asia-northeast1/asia-northeast1-a",
     {"gpu": "a100-40gb", "gpu_count": 1, "price": 1.70586, "spot_price": 0.9643,
      "price_is_floor": True, "cpus": None, "zone": "asia-northeast1-a"}),
    ("gcp/H100-MEGA x8 (accelerator only)/asia-northeast3/asia-northeast3-a",
     {"gpu": "h100-80gb", "gpu_count": 8, "price": 35.39149, "spot_price": None}),
    ("gcp/P4 x1 (accelerator only)/asia-southeast1/asia-southeast1-b",
     {"gpu": "p4", "gpu_count": 1, "price": 0.65, "spot_price": 0.0662}),
    ("lambda/gpu_8x_h100_sxm5/europe-central-1",
     {"gpu": "h100-80gb", "gpu_count": 8, "gpu_memory_mib": 81920, "cpus": 208.0,
      "memory_gib": 1800.0, "price": 23.92, "spot_price": None}),
    ("nebius/gpu-h200-sxm_1gpu-16vcpu-200gb/eu-north1",
     {"gpu": "h200", "gpu_count": 1, "gpu_memory_mib": 143771, "cpus": 16.0,
      "memory_gib": 200.0, "price": 3.5, "spot_price": 1.45}),
    ("nebius/gpu-h100-sxm_1gpu-16vcpu-200gb/eu-north1",
     {"gpu": "h100-80gb", "gpu_count": 1, "price": 2.95, "spot_price": 1.25}),
    ("runpod/8x_H100-SXM_SECURE/CA/CA-MTL-1",
     {"gpu": "h100-80gb", "gpu_count": 8, "cpus": 160.0, "memory_gib": 640.0, "price": 23.92,
      "spot_price": 21.52, "region": "CA", "zone": "CA-MTL-1"}),
    ("runpod/1x_MI300X_SECURE/CA/CA-MTL-1",
     {"gpu": "mi300x", "gpu_count": 1, "price": 2.49, "spot_price": None}),
    ("runpod/1x_A100-80GB_SECURE/CA/CA-MTL-1",
     {"gpu": "a100-80gb", "gpu_count": 1, "price": 1.64, "spot_price": 1.19}),
    ("vast/1x-H100_SXM-32-65536/Czechia, CZ, EU",
     {"gpu": "h100-80gb", "gpu_count": 1, "gpu_memory_mib": 81559, "price": 1.8,
      "spot_price": None, "cpus": None, "region": "Czechia, CZ, EU"}),
    ("vast/1x-RTX_5090-32-65536/British Columbia, CA, NA",
     {"gpu": "rtx-5090", "gpu_count": 1, "price": 0.53}),
    ("vast/8x-H100_SXM-32-65536/" + next(r["Region"] for r in rows("vast")
                                        if r["InstanceType"] == "8x-H100_SXM-32-65536"),
     {"gpu": "h100-80gb", "gpu_count": 8, "gpu_memory_mib": 81559}),
]


@pytest.mark.parametrize(("offer_id", "fields"), SPOT_CHECKS)
def test_spot_check_rows(offer_id: str, fields: dict[str, Any]) -> None:
    offer = by_id()[offer_id]
    assert offer.provider == offer_id.split("/", 1)[0]
    for name, value in fields.items():
        assert getattr(offer, name) == value, name


def test_aws_p4de_a100_rows_are_a100_80gb() -> None:
    p4de = [r for r in rows("aws") if r["InstanceType"] == "p4de.24xlarge"]
    named_a100 = [r for r in p4de if ast.literal_eval(r["GpuInfo"])["Gpus"][0]["Name"] == "A100"]
    assert len(p4de) == 15
    assert named_a100
    for row in named_a100:
        assert catalogue().identify("A100", 81920).id == "a100-80gb"
        info = ast.literal_eval(row["GpuInfo"])
        assert info["Gpus"][0]["MemoryInfo"]["SizeInMiB"] == 81920
    offers = [o for o in catalog_offers() if o.instance_type == "p4de.24xlarge"]
    assert len(offers) == 15
    assert {(o.gpu, o.gpu_memory_mib, o.gpu_count) for o in offers} == {("a100-80gb", 81920, 8)}


def test_cudo_h100_with_96256_mib_is_h100_nvl() -> None:
    cudo = [o for o in catalog_offers() if o.provider == "cudo"]
    nvl = [o for o in cudo if o.gpu_memory_mib == 96256]
    assert nvl
    assert all(o.gpu == "h100-nvl" and "h100-nvl" in o.instance_type for o in nvl)
    assert all(o.gpu != "h100-nvl" for o in cudo if "h100-nvl" not in o.instance_type)
    assert catalogue().identify("H100", 96256).id == "h100-nvl"


def test_offers_with_per_gpu_memory_match_their_model() -> None:
    """Where the listed per-GPU memory is kept, it is within tolerance of the model's."""
    models = catalogue().models
    counts: Counter[str] = Counter()
    for o in catalog_offers():
        assert o.gpu_memory_mib is not None
        assert models[o.gpu].memory_matches(o.gpu_memory_mib), o.id
        counts[o.gpu] += 1
    assert counts["a100-80gb"] > 0 and counts["a100-40gb"] > 0


@pytest.mark.parametrize(
    ("instance", "gpu", "memory_mib"),
    [
        ("1x-A100_SXM4-32-65536", "a100-40gb", 40960),
        ("4x-A100_SXM4-32-65536", "a100-40gb", 40960),
        ("8x-A100_SXM4-32-65536", "a100-40gb", 40960),
        ("2x-H100_SXM-32-65536", "h100-80gb", 81559),
        ("2x-H100_NVL-32-65536", "h100-nvl", 95830),
        ("1x-Tesla_V100-32-65536", "v100-16gb", 16384),
        ("2x-A100_SXM4-32-65536", "a100-40gb", 40960),
        ("2x-Tesla_V100-32-65536", "v100-16gb", 16384),
    ],
)
def test_vast_gpu_memory_is_an_instance_total(instance: str, gpu: str, memory_mib: int) -> None:
    offers = [o for o in catalog_offers() if o.provider == "vast" and o.instance_type == instance]
    assert offers
    for o in offers:
        assert (o.gpu, o.gpu_memory_mib) == (gpu, memory_mib)
