"""What a job pays on a node's free capacity: its share of the whole node's price, so one node
costs the same per CPU (or per GPU) however much of it is free."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bourse.core.compute import Compute
from bourse.core.constraints import offer_price, share
from bourse.core.offer import Offer

NODE = Offer(id="n-1", provider="node", instance_type="cpu-box", region="local", gpu=None,
             gpu_count=0, gpu_memory_mib=None, cpus=4, memory_gib=16, price=0.16,
             divisible=True, node_id="n-1", source="node", priced_cpus=4)


@pytest.mark.parametrize("free_cpus", [4, 3, 1.5, 1])
def test_a_cpu_costs_the_same_however_many_are_free(free_cpus: float) -> None:
    offer = replace(NODE, cpus=free_cpus)
    assert offer_price(Compute(cpus=1), offer) == (pytest.approx(0.04), False)
    assert share(Compute(cpus=0.5), offer) == pytest.approx(0.125)


def test_without_a_priced_count_the_offer_is_its_free_cpus() -> None:
    assert share(Compute(cpus=1), replace(NODE, cpus=2, priced_cpus=None)) == 0.5
    assert share(Compute(cpus=1), replace(NODE, divisible=False)) == 1.0


def test_a_gpu_job_pays_its_gpus_share_of_the_node() -> None:
    """Placement gives an offer of 2 free GPUs of an 8-GPU node ``gpu_price_share`` 2/8."""
    offer = replace(NODE, gpu="a100-80gb", gpu_count=2, gpu_memory_mib=81920, price=16.0,
                    gpu_price_share=2 / 8, priced_cpus=64, cpus=20)
    assert offer_price(Compute(gpu="a100-80gb:1"), offer) == (pytest.approx(2.0), False)
