"""``Compute``: the shorthand people write, its JSON form, and the errors it raises."""

from __future__ import annotations

from typing import Any

import pytest

from bourse.core.compute import Bounds, Compute
from bourse.core.errors import InvalidInput, UnknownGpu
from bourse.core.gpus import catalogue
from bourse.core.match import explain, match
from bourse.market.catalogs import catalog_offers

A100_FAMILY = {"a100-40gb", "a100-80gb"}
H100_FAMILY = {"h100-80gb", "h100-nvl"}


@pytest.mark.parametrize(
    ("gpu", "models", "count", "memory"),
    [
        ("a100-40gb", {"a100-40gb"}, 1, Bounds()),
        ("A100-40GB", {"a100-40gb"}, 1, Bounds()),
        ("a100", A100_FAMILY, 1, Bounds()),
        ("h100|a100-80gb", H100_FAMILY | {"a100-80gb"}, 1, Bounds()),
        ("h100-80gb|a100-80gb", {"h100-80gb", "a100-80gb"}, 1, Bounds()),
        ("a100|a100-40gb", A100_FAMILY, 1, Bounds()),
        ("a100:8", A100_FAMILY, 8, Bounds()),
        ("h100|a100-80gb:8", H100_FAMILY | {"a100-80gb"}, 8, Bounds()),
        ("NVIDIA A100-SXM4-40GB:2", {"a100-40gb"}, 2, Bounds()),
        ("24GB..80GB:2", set(), 2, Bounds(min=24, max=80)),
        ("40GB+", set(), 1, Bounds(min=40)),
        ("..24GB", set(), 1, Bounds(max=24)),
        ("a100|40GB+", A100_FAMILY, 1, Bounds(min=40)),
    ],
)
def test_gpu_shorthand(gpu: str, models: set[str], count: int, memory: Bounds) -> None:
    spec = Compute(gpu).gpu
    assert spec is not None
    assert set(spec.models) == models
    assert len(spec.models) == len(models)  # no duplicates
    assert spec.count == count
    assert spec.memory == memory


@pytest.mark.parametrize("gpu", ["cpu", "none", "CPU", "None"])
def test_no_gpu(gpu: str) -> None:
    assert Compute(gpu).gpu is None
    assert Compute(gpu=gpu).gpu is None
    assert Compute().gpu is None


def test_positional_form() -> None:
    c = Compute("a100-40gb", disk="100GB", spot="prefer", max_price=0.5)
    assert c.gpu is not None
    assert c.gpu.models == ("a100-40gb",)
    assert c.gpu.count == 1
    assert c.disk == Bounds(min=100)
    assert c.spot == "prefer"
    assert c.max_price == 0.5
    assert c == Compute(gpu="a100-40gb", disk="100GB", spot="prefer", max_price="$0.50")


@pytest.mark.parametrize(
    ("kwargs", "models", "count", "memory"),
    [
        ({"gpus": 4}, set(), 4, Bounds()),
        ({"gpu_memory": "40GB+"}, set(), 1, Bounds(min=40)),
        ({"gpus": 2, "gpu_memory": "24GB..48GB"}, set(), 2, Bounds(min=24, max=48)),
        ({"gpu": "a100", "gpus": 2}, A100_FAMILY, 2, Bounds()),
        ({"gpu": "a100:2", "gpus": 4}, A100_FAMILY, 4, Bounds()),
        ({"gpu": "h100", "gpu_memory": "90GB+"}, H100_FAMILY, 1, Bounds(min=90)),
        ({"gpu": "a100", "gpus": 4, "gpu_memory": "80GB"}, A100_FAMILY, 4, Bounds(min=80)),
    ],
)
def test_gpus_and_gpu_memory_kwargs(kwargs: dict[str, Any], models: set[str], count: int,
                                    memory: Bounds) -> None:
    spec = Compute(**kwargs).gpu
    assert spec is not None
    assert set(spec.models) == models
    assert spec.count == count
    assert spec.memory == memory


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("cpus", "8", Bounds(min=8)),
        ("cpus", "8..32", Bounds(min=8, max=32)),
        ("cpus", 16, Bounds(min=16)),
        ("memory", "64GB+", Bounds(min=64)),
        ("memory", "512MB..2TB", Bounds(min=0.5, max=2048)),
        ("disk", "1TB", Bounds(min=1024)),
    ],
)
def test_sized_fields(field: str, value: Any, expected: Bounds) -> None:
    assert getattr(Compute(**{field: value}), field) == expected


@pytest.mark.parametrize(
    ("kwargs", "attr", "expected"),
    [
        ({"regions": "us-east-1, eu-*"}, "regions", ("us-east-1", "eu-*")),
        ({"exclude_providers": ["vast"]}, "exclude_providers", ("vast",)),
        ({"tags": "hipaa"}, "tags", ("hipaa",)),
        ({"gpu": "a100", "cuda": ">=12.1"}, "cuda", "12.1"),
        ({"gpu": "a100", "cuda": "12.1+"}, "cuda", "12.1"),
        ({"gpu": "a100", "torch": "2.1"}, "torch", "2.1"),
        ({"spot": "ONLY"}, "spot", "only"),
        ({"spot": True}, "spot", "only"),
        ({"spot": False}, "spot", "never"),
        ({"max_price": "0.5/h"}, "max_price", 0.5),
        ({"num_nodes": 4}, "num_nodes", 4),
    ],
)
def test_other_fields(kwargs: dict[str, Any], attr: str, expected: Any) -> None:
    assert getattr(Compute(**kwargs), attr) == expected


@pytest.mark.parametrize(
    "compute",
    [
        Compute(),
        Compute("a100-40gb", disk="100GB", spot="prefer", max_price=0.5),
        Compute("h100|a100-80gb:8", cpus="32+", memory="64GB..512GB", cuda=">=12.1",
                torch="2.1", regions="us-*", exclude_providers=["vast"], tags="hipaa",
                num_nodes=2),
        Compute("24GB..80GB:2", spot="only"),
        Compute(gpus=4, gpu_memory="40GB+"),
        Compute("cpu", cpus="4..8"),
    ],
)
def test_json_round_trip(compute: Compute) -> None:
    assert Compute.model_validate_json(compute.model_dump_json()) == compute
    assert Compute.model_validate(compute.model_dump()) == compute


@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        (("a100:0",), {}, "gpu"),
        (("a100:-1",), {}, "gpu"),
        (("a100:x",), {}, "gpu"),
        ((), {"gpus": 0}, "gpus"),
        ((), {"gpus": -2}, "gpus"),
        (("a100",), {"gpus": 0}, "gpus"),
        ((), {"gpu_memory": "80GB..24GB"}, "gpu_memory"),
        ((), {"memory": "64GB..32GB"}, "memory"),
        ((), {"cpus": "32..8"}, "cpus"),
        ((), {"cpus": -1}, "cpus"),
        ((), {"disk": "1TB..10GB"}, "disk"),
        ((), {"max_price": "cheap"}, "max_price"),
        ((), {"max_price": -1}, "max_price"),
        ((), {"max_price": 0}, "max_price"),
        ((), {"max_price": float("nan")}, "max_price"),
        ((), {"spot": "maybe"}, "spot"),
        ((), {"cuda": ">=12.1"}, "cuda"),
        (("cpu",), {"cuda": "12.1"}, "cuda"),
        (("a100",), {"cuda": "<12"}, "cuda"),
        (("a100",), {"cuda": "13.9"}, "cuda"),
        (("mi300x",), {"cuda": "12.1"}, "cuda"),
        (("a100",), {"torch": "9.9"}, "torch"),
        ((), {"num_nodes": 0}, "num_nodes"),
        ((), {"regions": 1}, "regions"),  # found by the API fuzzer: was a TypeError
        ((), {"cpus": None}, "cpus"),
        ((), {"max_price": {}}, "max_price"),
        ((), {"regions": "us-east-1", "exclude_regions": "us-*"}, "regions"),
        ((), {"providers": "aws", "exclude_providers": "aws"}, "providers"),
        ((), {"colour": "red"}, "colour"),
        (("a100-40",), {}, "gpu"),
        (("a100|",), {}, "gpu"),
        (("a100",), {"gpu": "h100"}, "gpu"),
        (("80GB..24GB",), {}, "gpu"),
        (("",), {}, "gpu"),
    ],
)
def test_errors_name_the_field(args: tuple[Any, ...], kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        Compute(*args, **kwargs)
    assert info.value.field == field


def test_unknown_gpu_label_suggests() -> None:
    with pytest.raises(UnknownGpu) as info:
        Compute("a100-40")
    assert info.value.suggestions[0] == "a100-40gb"


def test_packages_cannot_go_into_an_image() -> None:
    with pytest.raises(InvalidInput, match="packages cannot be installed into an image") as info:
        Compute(image="python:3.12", packages="six")
    assert info.value.field == "packages"
    assert Compute(image="python:3.12", torch="2.1").describe() == \
        "no GPU, torch=2.1, image=python:3.12"


NVIDIA = {m.id for m in catalogue().models.values() if m.vendor == "nvidia"}


@pytest.mark.parametrize(("gpu", "models", "count", "memory"), [
    ("gpu", set(), 1, Bounds()),  # Lightning's CloudCompute("gpu"): one GPU, any model
    ("GPU", set(), 1, Bounds()),
    ("any", set(), 1, Bounds()),
    ("gpu:4", set(), 4, Bounds()),
    ("gpu|40GB+", set(), 1, Bounds(min=40)),
    ("cuda", NVIDIA, 1, Bounds()),
    ("cuda:8", NVIDIA, 8, Bounds()),
])
def test_words_for_any_gpu(gpu: str, models: set[str], count: int, memory: Bounds) -> None:
    spec = Compute(gpu).gpu
    assert spec is not None
    assert (set(spec.models), spec.count, spec.memory) == (models, count, memory)


def test_any_gpu_matches_every_gpu_offer_and_no_cpu_one() -> None:
    offers = catalog_offers()
    found = {m.offer.gpu for m in match(Compute("gpu"), offers, limit=None)}
    assert None not in found
    assert found == {o.gpu for o in offers if o.gpu_count == 1}
    cuda = {m.offer.gpu for m in match(Compute("cuda"), offers, limit=None)}
    assert cuda and cuda <= NVIDIA and "mi300x" not in cuda
    assert explain(Compute("gpu"), offers).lines()[0].endswith("offers considered for gpu:1")


@pytest.mark.parametrize(("gpu", "says"), [
    ("gpu-fast", 'Compute("v100", cpus=8, memory="61GB")'),
    ("gpu-fast-multi", 'Compute("v100:4", cpus=32, memory="244GB")'),
    ("cpu-small", 'Compute("cpu", cpus=2, memory="8GB")'),
    ("cpu-medium", 'Compute("cpu", cpus=8, memory="32GB")'),
    ("default", 'Compute("cpu", cpus=1, memory="4GB")'),
    ("gpu|h100", "write gpu alone"),
])
def test_lightning_machine_names_say_what_they_stood_for(gpu: str, says: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        Compute(gpu)
    assert refused.value.field == "gpu"
    assert says in str(refused.value)


def test_nodes_is_num_nodes_as_dstack_writes_it() -> None:
    assert Compute("cpu", nodes=3).num_nodes == 3
    assert Compute(nodes=2).describe() == "2 nodes, each no GPU"
    for bad, says in (({"nodes": 2, "num_nodes": 2}, "nodes and num_nodes both given"),
                      ({"nodes": True}, "num_nodes must be a whole number"),
                      ({"nodes": "2"}, "num_nodes must be a whole number"),
                      ({"nodes": 0}, "from 1 to 1024")):
        with pytest.raises(InvalidInput, match=says):
            Compute(**bad)
