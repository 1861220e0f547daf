"""``Offer``: what can satisfy a Compute — a cloud instance type or a node's free slice."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

OfferSource = Literal["catalog", "node"]


@dataclass(frozen=True, slots=True)
class Offer:
    """One offer. Prices are US dollars per hour for the whole offer.

    ``divisible`` offers (a node's free capacity) sell slices: a job pays the share of the price
    that its GPUs (or, for CPU jobs, its cpus) are of the node's — the whole node's, busy
    capacity included, so that one node costs the same per CPU and per GPU however busy it is
    (``priced_cpus``; ``cpus`` is what is free). Catalogue instance types are not divisible: a
    job takes the whole instance. ``price_is_floor`` marks prices known to
    exclude part of the cost (GCP's accelerator-attachment rows exclude the host VM).

    A node whose free GPUs are of several kinds (models, MIG slices) makes one offer per kind:
    each carries the node's price, and ``gpu_price_share`` is the part of it that the kind's
    free GPUs are of all the node's GPUs (by weight: a whole GPU 1, a MIG slice its share of
    the GPU's memory), so a GPU job pays for what it takes and a CPU job the same on any of
    them. ``gpu_slice`` names
    the MIG profile of an offer of MIG slices (``gpu`` is then the parent's model).
    """

    id: str
    provider: str
    instance_type: str
    region: str
    gpu: str | None  # canonical model id from the GPU catalogue; None for CPU-only offers
    gpu_count: int
    gpu_memory_mib: int | None  # per GPU
    cpus: float | None
    memory_gib: float | None
    price: float | None  # on-demand; None when the offer has no on-demand price
    spot_price: float | None = None  # None when the offer is not sold as interruptible
    zone: str | None = None
    node_id: str | None = None
    disk_gib: float | None = None
    driver: str | None = None  # None: installed at provisioning
    max_cuda: str | None = None
    os: str | None = None
    packages: tuple[str, ...] = ()
    # container tools on the node (docker, podman, nvidia-container-cli); None: installed at
    # provisioning (catalogue offers)
    engines: frozenset[str] | None = None
    available: int | None = None  # free units (instances or nodes); None when unknown
    verified_at: datetime | None = None
    sla: float | None = None  # measured availability, 0..1
    tags: frozenset[str] = field(default_factory=frozenset)
    divisible: bool = False
    price_is_floor: bool = False
    source: OfferSource = "catalog"
    gpu_slice: str | None = None  # "1g.18gb": the offer sells MIG slices of ``gpu``
    gpu_price_share: float = 1.0  # the share of ``price`` its GPUs are (see above)
    priced_cpus: float | None = None  # the cpus ``price`` is for; None: ``cpus``

    @property
    def interruptible(self) -> bool:
        return self.spot_price is not None
