"""The constraints a Compute puts on an Offer, each a pure check that says what is lacking.

Order matters for ``explain``: an offer rejected by several constraints is counted against the
first of them, so the counts add up to the number of rejected offers. The matcher in
``core.match`` (a plain loop) and the vectorised index in ``market.index`` implement the same
rules; tests hold them equal.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from bourse.core.compute import Bounds, Compute
from bourse.core.cuda import Verdict, can_run, parse_cuda_floor, runnable_build
from bourse.core.gpus import catalogue
from bourse.core.offer import Offer
from bourse.core.versions import parse_version

Check = Callable[[Compute, Offer], str | None]


@dataclass(frozen=True, slots=True)
class Constraint:
    name: str
    check: Check


def globs_allow(value: str | None, allow: tuple[str, ...], deny: tuple[str, ...]) -> bool:
    if value is None:
        return not allow
    if allow and not any(fnmatch.fnmatchcase(value, g) for g in allow):
        return False
    return not any(fnmatch.fnmatchcase(value, g) for g in deny)


def share(compute: Compute, offer: Offer) -> float:
    """The fraction of an offer's price a job pays: of a divisible offer, its GPUs' or its
    cpus' share of the node's (``Offer``); 1.0 for whole instances."""
    if not offer.divisible:
        return 1.0
    if compute.gpu is not None and offer.gpu_count:
        return compute.gpu.count / offer.gpu_count * offer.gpu_price_share
    whole = offer.priced_cpus or offer.cpus
    if whole:  # a CPU job reserves the CPUs it asks for, one when it does not say
        return min(1.0, (compute.cpus.min if compute.cpus.min > 0 else 1.0) / whole)
    return 1.0


def offer_price(compute: Compute, offer: Offer) -> tuple[float, bool] | None:
    """The price this job would pay on this offer and whether it is a spot price."""
    spot = compute.spot
    if spot == "only" or (spot == "prefer" and offer.spot_price is not None):
        base, is_spot = offer.spot_price, True
    else:
        base, is_spot = offer.price, False
    if base is None:
        return None
    return base * share(compute, offer), is_spot


def _provider(c: Compute, o: Offer) -> str | None:
    if globs_allow(o.provider, c.providers, c.exclude_providers):
        return None
    return f"provider {o.provider} not allowed"


def _region(c: Compute, o: Offer) -> str | None:
    if not c.regions and not c.exclude_regions:
        return None
    if not globs_allow(o.region, (), c.exclude_regions) or (
            o.zone is not None and not globs_allow(o.zone, (), c.exclude_regions)):
        return f"region {o.region}{'/' + o.zone if o.zone else ''} is excluded"
    if not c.regions or globs_allow(o.region, c.regions, ()) or (
            o.zone is not None and globs_allow(o.zone, c.regions, ())):
        return None
    return f"region {o.region} not allowed"


def _tags(c: Compute, o: Offer) -> str | None:
    missing = [t for t in c.tags if t not in o.tags]
    return f"lacks tags {', '.join(missing)}" if missing else None


def _gpu(c: Compute, o: Offer) -> str | None:
    if c.gpu is None:
        return None
    if o.gpu is None:
        return "has no GPU"
    if c.gpu.models and o.gpu not in c.gpu.models:
        return f"has {o.gpu}, not {'|'.join(c.gpu.models)}"
    if o.gpu_slice is not None:
        return _slice_lack(c.gpu.count, bool(c.gpu.models), o)
    return None


def _slice_lack(count: int, named: bool, o: Offer) -> str | None:
    """MIG slices go to jobs that size their GPU by memory (or take any GPU), never to a job
    that names the model, which expects the whole board; and one to a job: CUDA enumerates
    a single MIG device per process."""
    if named:
        return (f"has MIG slices {o.gpu_slice} of {o.gpu}, not whole GPUs (ask for the "
                "slice by its memory, e.g. gpu_memory='16GB+')")
    if count > 1:
        return f"has MIG slices {o.gpu_slice} (one per job: CUDA uses one), needs {count} GPUs"
    return None


def _gpu_count(c: Compute, o: Offer) -> str | None:
    if c.gpu is None:
        return None
    need = c.gpu.count
    ok = o.gpu_count >= need if o.divisible else o.gpu_count == need
    if ok:
        return None
    return f"has {o.gpu_count} GPUs{' free' if o.divisible else ''}, needs {need}"


def gpu_memory_gib(o: Offer) -> float | None:
    if o.gpu_memory_mib is not None:
        return o.gpu_memory_mib / 1024
    return catalogue().get(o.gpu).memory_gb if o.gpu else None


def _gpu_memory(c: Compute, o: Offer) -> str | None:
    if c.gpu is None or c.gpu.memory.unbounded:
        return None
    memory = gpu_memory_gib(o)
    if memory is not None and memory in c.gpu.memory:
        return None
    return f"GPU memory {_gb(memory)}, needs {c.gpu.memory.describe('GB')}"


def _gb(value: float | None) -> str:
    return "unknown" if value is None else f"{value:g}GB"


def _within(bounds: Bounds, value: float | None, divisible: bool) -> bool:
    if value is None:
        return False
    return value >= bounds.min if divisible else value in bounds


def _sized(name: str, unit: str, attr: str, unknown_ok: bool = False) -> Check:
    def check(c: Compute, o: Offer) -> str | None:
        bounds: Bounds = getattr(c, name)
        value: float | None = getattr(o, attr)
        if bounds.unbounded or _within(bounds, value, o.divisible):
            return None
        if value is None and unknown_ok and o.source == "catalog":
            return None  # a provisioned instance gets a disk of the size asked for
        have = "unknown" if value is None else f"{value:g}{unit}"
        return f"{name} {have}, needs {bounds.describe(unit)}"

    return check


def _spot(c: Compute, o: Offer) -> str | None:
    if c.spot == "only" and o.spot_price is None:
        return "not sold as spot"
    if c.spot == "never" and o.price is None:
        return "no on-demand price (spot only)"
    if o.price is None and o.spot_price is None:
        return "no price"
    return None


def _max_price(c: Compute, o: Offer) -> str | None:
    if c.max_price is None:
        return None
    priced = offer_price(c, o)
    if priced is None or priced[0] <= c.max_price:
        return None
    return f"${priced[0]:.2f}/h is above max_price ${c.max_price:.2f}/h"


def _reliability(c: Compute, o: Offer) -> str | None:
    if c.min_reliability is None or (o.sla is not None and o.sla >= c.min_reliability):
        return None
    need = f"needs {c.min_reliability:.1%}"
    if o.sla is None:
        return f"reliability not measured (a node watched under an hour, or a cloud offer), {need}"
    return f"reliability {o.sla:.1%}, {need}"


@lru_cache(maxsize=65536)
def environment_ok(
    driver: str | None, gpu: str | None, torch: str | None, cuda: str | None
) -> bool:
    """Whether the environment runs there (the matcher's fast path; see environment_verdict)."""
    if torch is None and cuda is None:
        return True
    return runnable_build(
        parse_version(driver, field="driver") if driver else None,
        catalogue().get(gpu) if gpu else None, torch, parse_cuda_floor(cuda) if cuda else None,
    ) is not None


@lru_cache(maxsize=4096)
def environment_verdict(
    driver: str | None, gpu: str | None, torch: str | None, cuda: str | None
) -> Verdict:
    return can_run(driver, gpu, torch=torch, cuda=cuda)


def _environment(c: Compute, o: Offer) -> str | None:
    if c.gpu is None or o.gpu is None or (c.torch is None and c.cuda is None):
        return None
    if environment_ok(o.driver, o.gpu, c.torch, c.cuda):
        return None
    return environment_verdict(o.driver, o.gpu, c.torch, c.cuda).reason


ENGINES = frozenset({"docker", "podman"})
GPU_CONTAINERS = "nvidia-container-cli"  # NVIDIA's container toolkit: GPUs into containers
CONTAINER_TOOLS = ("docker", "podman", GPU_CONTAINERS)  # what a node reports as ``engines``


def container_engines(tool_names: Iterable[str]) -> list[str]:
    """The container tools among the programs a probe found."""
    return [name for name in tool_names if name in CONTAINER_TOOLS]


def image_lack(engines: frozenset[str] | None, image: str | None, gpu: bool) -> str | None:
    """Why a node with these container tools cannot run ``image`` (None: it can, or the
    tools are installed at provisioning)."""
    if image is None or engines is None:
        return None
    if not engines & ENGINES:
        return f"no container engine (docker or podman) to run image {image}"
    if gpu and GPU_CONTAINERS not in engines:
        return f"no NVIDIA container toolkit ({GPU_CONTAINERS}) to give image {image} its GPUs"
    return None


def _image(c: Compute, o: Offer) -> str | None:
    return image_lack(o.engines, c.image, c.gpu is not None)


def _capacity(c: Compute, o: Offer) -> str | None:
    need = c.num_nodes if o.source == "catalog" else 1
    if o.available is None or o.available >= need:
        return None
    return f"{o.available} available, needs {need}"


CONSTRAINTS: tuple[Constraint, ...] = (
    Constraint("gpu", _gpu),
    Constraint("gpu_count", _gpu_count),
    Constraint("gpu_memory", _gpu_memory),
    Constraint("provider", _provider),
    Constraint("region", _region),
    Constraint("tags", _tags),
    Constraint("cpus", _sized("cpus", "", "cpus")),
    Constraint("memory", _sized("memory", "GB", "memory_gib")),
    Constraint("disk", _sized("disk", "GB", "disk_gib", unknown_ok=True)),
    Constraint("spot", _spot),
    Constraint("max_price", _max_price),
    Constraint("reliability", _reliability),
    Constraint("environment", _environment),
    Constraint("image", _image),
    Constraint("capacity", _capacity),
)


def lacks(compute: Compute, offer: Offer) -> list[tuple[str, str]]:
    """Every constraint the offer fails, as (constraint name, what is lacking)."""
    found = []
    for constraint in CONSTRAINTS:
        reason = constraint.check(compute, offer)
        if reason is not None:
            found.append((constraint.name, reason))
    return found


def first_lack(compute: Compute, offer: Offer) -> tuple[str, str] | None:
    for constraint in CONSTRAINTS:
        reason = constraint.check(compute, offer)
        if reason is not None:
            return constraint.name, reason
    return None
