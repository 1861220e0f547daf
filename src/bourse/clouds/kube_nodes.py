"""A Kubernetes cluster's GPU nodes as offers (pure: the API's node objects in, offers out).

A node offers GPUs when it is Ready, schedulable and has allocatable ``nvidia.com/gpu``. Its
model comes from its labels, normalised with bourse's GPU catalogue: GPU Feature Discovery's
``nvidia.com/gpu.product`` (with ``nvidia.com/gpu.memory``, MiB), GKE's
``cloud.google.com/gke-accelerator``, EKS's ``k8s.amazonaws.com/accelerator``, and, last, the
cloud instance type of ``node.kubernetes.io/instance-type`` looked up in the shipped
catalogues. Vendors spell one GPU differently (``NVIDIA-A100-SXM4-80GB``,
``nvidia-a100-80gb``); a label the catalogue does not know is named in a note, never a crash,
and its node is not offered.

Nodes of one model in one zone are a *group*. Each group is offered in shapes of 1, 2, 4...
GPUs up to its largest node's allocatable count: a shape's CPUs and memory are the GPUs' share
of the smallest node that has them, and its price the operator's price per GPU-hour times the
GPUs (a cluster's GPUs are never free by default: a model without a price is not offered, and
a note says how to set one). A launch of a shape is one pod that asks exactly the shape, on a
node the group's labels select, tolerating the group's taints.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from bourse.core.errors import InvalidInput
from bourse.core.gpus import catalogue
from bourse.core.offer import Offer

GPU_RESOURCE = "nvidia.com/gpu"
PRODUCT = "nvidia.com/gpu.product"  # GPU Feature Discovery
MEMORY = "nvidia.com/gpu.memory"  # GFD: MiB per GPU
GKE = "cloud.google.com/gke-accelerator"
EKS = "k8s.amazonaws.com/accelerator"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
GPU_LABELS = (PRODUCT, GKE, EKS)
PROVIDER = "kubernetes"
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)$")
_SUFFIX = {"": 1.0, "m": 1e-3, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}


def quantity(text: object) -> float | None:
    """A Kubernetes quantity (``8``, ``500m``, ``64Gi``, ``1e3`` is not accepted) as a number;
    None when it is not one."""
    found = _QUANTITY.match(str(text).strip())
    if found is None or found.group(2) not in _SUFFIX:
        return None
    return float(found.group(1)) * _SUFFIX[found.group(2)]


@dataclass(frozen=True)
class GpuLabel:
    """The label a node's model was read from (``key``, ``value``) and the model (None when the
    catalogue does not know it)."""

    key: str
    value: str
    model: str | None
    memory_mib: int | None = None


def gpu_of(labels: Mapping[str, str]) -> GpuLabel | None:
    """The node's GPU model from its labels, the first label that names one; None when it has
    no GPU label at all. A label the catalogue does not know gives a GpuLabel with no model."""
    memory = quantity(labels.get(MEMORY, "")) if labels.get(MEMORY) else None
    unknown: GpuLabel | None = None
    for key in GPU_LABELS:
        value = labels.get(key)
        if not value:
            continue
        model = model_of(value, int(memory) if memory and key == PRODUCT else None)
        found = GpuLabel(key, value, model, int(memory) if memory else None)
        if model is not None:
            return found
        unknown = unknown or found
    kind = labels.get(INSTANCE_TYPE)
    if kind and kind in _instance_gpus():
        return GpuLabel(INSTANCE_TYPE, kind, _instance_gpus()[kind])
    return unknown


def model_of(value: str, memory_mib: int | None) -> str | None:
    """A vendor's GPU label value as a catalogue id (None: unknown). GFD writes
    ``NVIDIA-A100-SXM4-80GB`` (``-SHARED`` when time-sliced), GKE ``nvidia-tesla-a100``."""
    text = value.removesuffix("-SHARED").replace("-", " ").replace("_", " ")
    try:
        return catalogue().identify(text, memory_mib).id
    except (InvalidInput, ValueError):
        return None


@cache
def _instance_gpus() -> dict[str, str]:
    """Cloud instance type -> its GPU model, from the shipped catalogues."""
    from bourse.market.catalogs import catalog_offers
    return {o.instance_type: o.gpu for o in catalog_offers() if o.gpu}


@dataclass(frozen=True)
class Node:
    """One GPU node as offers need it."""

    name: str
    gpus: int
    cpus: float
    memory_gib: float
    gpu: GpuLabel | None
    zone: str | None
    taints: tuple[Mapping[str, str], ...] = ()
    why_not: str | None = None  # why it offers nothing (not Ready, cordoned, ...)


def node_of(obj: Mapping[str, Any]) -> Node | None:
    """A node object of ``GET /api/v1/nodes``; None when it has no GPUs at all."""
    meta, spec, status = (obj.get(k) or {} for k in ("metadata", "spec", "status"))
    allocatable = status.get("allocatable") or {}
    gpus = quantity(allocatable.get(GPU_RESOURCE, "0")) or 0
    if gpus < 1:
        return None
    labels = meta.get("labels") or {}
    name = str(meta.get("name", "?"))
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or [])
    why = ("cordoned (spec.unschedulable)" if spec.get("unschedulable")
           else None if ready else "not Ready")
    taints = tuple({k: str(t[k]) for k in ("key", "value", "effect") if t.get(k)}
                   for t in spec.get("taints") or [] if t.get("effect") in (
                       "NoSchedule", "NoExecute"))
    return Node(name=name, gpus=int(gpus),
                cpus=quantity(allocatable.get("cpu", "0")) or 0.0,
                memory_gib=(quantity(allocatable.get("memory", "0")) or 0.0) / 2.0**30,
                gpu=gpu_of(labels), zone=labels.get(ZONE), taints=taints, why_not=why)


@dataclass(frozen=True)
class Shape:
    """What one launch of an offer asks of the cluster: the pod's resources and where it may
    go. ``selectors``: (label key, values) pairs, any of which places it (ORed node selector
    terms); ``zone``: and this zone."""

    gpus: int
    cpus: float
    memory_gib: float
    selectors: tuple[tuple[str, tuple[str, ...]], ...]
    zone: str | None = None
    tolerations: tuple[Mapping[str, str], ...] = ()


@dataclass
class Listing:
    """The offers of a cluster, each offer's shape by instance type and zone, and notes on
    what was left out and why."""

    offers: list[Offer] = field(default_factory=list)
    shapes: dict[tuple[str, str | None], Shape] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def listing(objects: Iterable[Mapping[str, Any]], *, cluster: str,
            prices: Mapping[str, float]) -> Listing:
    """The offers of a cluster's nodes (``prices``: $/GPU-hour by model id, ``*`` for any)."""
    out = Listing()
    groups: dict[tuple[str, str | None], list[Node]] = defaultdict(list)
    for obj in objects:
        node = node_of(obj)
        if node is None:
            continue
        why = _why_not(node)
        if why is not None:
            out.notes.append(f"node {node.name}: {why}")
            continue
        assert node.gpu is not None and node.gpu.model is not None
        groups[(node.gpu.model, node.zone)].append(node)
    unpriced: dict[str, list[str]] = defaultdict(list)
    for (model, zone), nodes in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        price = prices.get(model, prices.get("*"))
        if price is None:
            unpriced[model] += [n.name for n in nodes]
            continue
        for offer, shape in _group_offers(cluster, model, zone, nodes, price):
            out.offers.append(offer)
            out.shapes[(offer.instance_type, zone)] = shape
    for model, names in sorted(unpriced.items()):
        out.notes.append(f"{model} ({len(names)} node(s): {_names(names)}) has no price, so it "
                         f"is not offered: set one with --kube-gpu-price {model}=USD (per GPU-"
                         "hour; 0 for free)")
    return out


def _why_not(node: Node) -> str | None:
    if node.why_not is not None:
        return f"{node.why_not}; not offered"
    if node.gpu is None:
        return (f"{node.gpus} {GPU_RESOURCE} but no GPU label ({', '.join(GPU_LABELS)}); not "
                "offered: run GPU Feature Discovery, or label it "
                f"{PRODUCT}=<nvidia-smi's name>")
    if node.gpu.model is None and "-MIG-" in node.gpu.value:
        return (f"{node.gpu.key}={node.gpu.value!r} is a MIG slice: MIG slices of a cluster "
                "are not offered yet (nodes with whole GPUs are)")
    if node.gpu.model is None:
        return (f"GPU label {node.gpu.key}={node.gpu.value!r} names no GPU bourse knows; not "
                "offered (bourse gpus lists the known ones)")
    return None


def _names(names: Sequence[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def shape_counts(largest: int) -> list[int]:
    """1, 2, 4... up to ``largest``, and ``largest`` itself."""
    counts, n = [], 1
    while n < largest:
        counts.append(n)
        n *= 2
    return [*counts, largest]


def instance_type(model: str, gpus: int) -> str:
    return f"{model}.x{gpus}"


def _group_offers(cluster: str, model: str, zone: str | None, nodes: list[Node],
                  price: float) -> list[tuple[Offer, Shape]]:
    selectors: dict[str, set[str]] = defaultdict(set)
    for node in nodes:
        assert node.gpu is not None
        selectors[node.gpu.key].add(node.gpu.value)
    tolerations = tuple({tuple(sorted(t.items())): t for n in nodes for t in n.taints}.values())
    memory_mib = next((n.gpu.memory_mib for n in nodes if n.gpu and n.gpu.memory_mib), None)
    out = []
    for count in shape_counts(max(n.gpus for n in nodes)):
        fits = [n for n in nodes if n.gpus >= count]
        cpus = min(math.floor(n.cpus * count / n.gpus * 10) / 10 for n in fits)
        memory = min(math.floor(n.memory_gib * count / n.gpus) for n in fits)
        kind = instance_type(model, count)
        shape = Shape(count, cpus, float(memory), tuple(
            (key, tuple(sorted(values))) for key, values in sorted(selectors.items())),
            zone, tolerations)
        offer = Offer(id=f"{PROVIDER}/{cluster}/{zone or '-'}/{kind}", provider=PROVIDER,
                      instance_type=kind, region=cluster, gpu=model, gpu_count=count,
                      gpu_memory_mib=memory_mib or _catalogue_memory(model), cpus=cpus,
                      memory_gib=float(memory), price=round(price * count, 6), zone=zone,
                      available=len(fits))
        out.append((offer, shape))
    return out


def _catalogue_memory(model: str) -> int | None:
    found = catalogue().models.get(model)
    return found.memory_mib if found else None
