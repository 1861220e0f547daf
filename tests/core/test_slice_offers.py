"""MIG slices on the market: who may match an offer of slices, and what a job pays (pure)."""

from __future__ import annotations

import pytest

from bourse.core.compute import Compute
from bourse.core.match import explain, match
from bourse.core.offer import Offer


def node_offer(offer_id: str, gpu_count: int, memory_mib: int, sliced: str | None = None,
               share: float = 1.0) -> Offer:
    return Offer(id=offer_id, provider="node", instance_type="h200-box", region="local",
                 gpu="h200", gpu_count=gpu_count, gpu_memory_mib=memory_mib, cpus=16,
                 memory_gib=64, price=8.0, node_id="n1", divisible=True, source="node",
                 gpu_slice=sliced, gpu_price_share=share)


SLICES = node_offer("n1", 2, 16384, "1g.18gb", share=0.25)


@pytest.mark.parametrize(("compute", "reason"), [
    (Compute(gpu_memory="16GB+"), None),  # sized by memory: a slice of 16 GB fits
    (Compute(gpu="16GB..20GB:1"), None),
    (Compute(gpus=1), None),  # any GPU: a slice is a GPU to CUDA
    (Compute(gpu_memory="40GB+"), "GPU memory 16GB, needs 40GB+"),
    (Compute(gpu="h200"), "has MIG slices 1g.18gb of h200, not whole GPUs"),
    (Compute(gpu="16GB+:2"), "has MIG slices 1g.18gb (one per job: CUDA uses one), "
                             "needs 2 GPUs"),
    (Compute(cpus=2), None),  # a CPU job: no GPU asked, none given
])
def test_who_matches_an_offer_of_slices(compute: Compute, reason: str | None) -> None:
    found = match(compute, [SLICES])
    if reason is None:
        assert [m.offer.id for m in found] == ["n1"]
    else:
        assert found == []
        assert any(reason in line for line in explain(compute, [SLICES]).lines()), \
            explain(compute, [SLICES]).lines()


def test_a_job_pays_its_slices_share_and_a_cpu_job_the_same_on_any_offer() -> None:
    whole = node_offer("n1.1", 1, 143771, share=0.75)
    slice_job, cpu_job = Compute(gpu_memory="16GB+"), Compute(cpus=4)
    paid = {m.offer.id: m.price for m in match(slice_job, [SLICES, whole])}
    assert paid == {"n1": pytest.approx(8.0 * 0.25 / 2), "n1.1": pytest.approx(8.0 * 0.75)}
    assert [m.offer.id for m in match(slice_job, [whole, SLICES], limit=1)] == ["n1"]
    cpu_paid = {m.offer.id: m.price for m in match(cpu_job, [SLICES, whole])}
    assert cpu_paid == {"n1": pytest.approx(2.0), "n1.1": pytest.approx(2.0)}
