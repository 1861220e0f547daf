"""A node's GPU devices: what placement sells and gives to attempts, one device at a time.

A GPU is a device of its own, unless it runs in MIG mode with instances: then each MIG device
(a compute instance) is a device, and the whole GPU is not (CUDA cannot use it as one while
MIG is on). Each device has an *address*, the string ``CUDA_VISIBLE_DEVICES`` and the
container engines take:

- a GPU: its UUID (``GPU-…``), else its index (its place in the report when the source gives
  none; the agent sets ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that CUDA counts as nvidia-smi);
- a MIG device: its UUID (``MIG-…``, read through NVML), else ``MIG-<GPU UUID>/<GI>/<CI>``,
  the form CUDA documents for MIG devices; one with neither cannot be named and is not sold.

Compute instances of one GPU instance share its memory; each is offered with its share of it,
what it can count on when its siblings use theirs. Everything here is a function of its
inputs (the verified probe report's GPUs and the attempts' reservations).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bourse.core.hardware import GpuInfo, MigInstance

MAX_DEVICES_PER_NODE = 64
# what CUDA_VISIBLE_DEVICES and the engines take: GPU-<uuid>, MIG-<uuid>,
# MIG-GPU-<uuid>/<gi>/<ci>, or a GPU's index (never a comma: it separates devices)
DEVICE_ADDRESS = r"^(?:(?:GPU|MIG)-[A-Za-z0-9/-]{1,120}|[0-9]{1,3})$"
Kind = tuple[str | None, str | None]  # (model, MIG slice)


@dataclass(frozen=True, slots=True)
class Device:
    """One device placement can give to an attempt."""

    address: str  # what CUDA_VISIBLE_DEVICES and the engines are given
    model: str | None  # the GPU's canonical model (a slice: its parent's)
    memory_mib: int | None  # what a job can count on
    slice: str | None = None  # a MIG device: its profile ("1g.18gb") or "<n>GB" when unnamed
    weight: float = 1.0  # its share of a whole GPU, for pricing (a slice: its memory share)
    gpu_index: int | None = None

    @property
    def kind(self) -> Kind:
        """Devices of one kind are interchangeable: one offer sells them (readings of a
        model's memory differ a little from board to board: the offer says the least)."""
        return (self.model, self.slice)


def node_devices(gpus: Sequence[GpuInfo]) -> list[Device]:
    """Every device of a node, in order (GPU index, then MIG device index)."""
    found: list[Device] = []
    seen: set[str] = set()
    for position, listed in enumerate(gpus):
        for device in _devices(_indexed(listed, position)):
            if (device is not None and device.address not in seen
                    and re.match(DEVICE_ADDRESS, device.address)):
                seen.add(device.address)
                found.append(device)
    return found[:MAX_DEVICES_PER_NODE]


def _indexed(g: GpuInfo, position: int) -> GpuInfo:
    """The GPU with an index: its place in the list where the source gave none (the sources
    list GPUs in index order)."""
    return g if g.index is not None else g.model_copy(update={"index": position})


def _devices(g: GpuInfo) -> list[Device | None]:
    return _mig_devices(g) if g.mig_enabled and g.mig_instances else [_whole(g)]


def _whole(g: GpuInfo) -> Device:
    return Device(g.uuid or str(g.index), g.model, g.memory_mib, gpu_index=g.index)


def _mig_devices(g: GpuInfo) -> list[Device | None]:
    per_gi = Counter(m.gpu_instance_id for m in g.mig_instances)
    return [_slice(g, m, per_gi[m.gpu_instance_id]) for m in g.mig_instances]


def _slice(g: GpuInfo, m: MigInstance, siblings: int) -> Device | None:
    address = mig_address(g, m)
    if address is None:
        return None
    memory = m.memory_mib // max(siblings, 1) if m.memory_mib else None
    weight = memory / g.memory_mib if memory and g.memory_mib else 1 / 7
    return Device(address, g.model, memory, slice=slice_name(m, memory),
                  weight=round(min(weight, 1.0), 4), gpu_index=g.index)


def mig_address(g: GpuInfo, m: MigInstance) -> str | None:
    if m.uuid:
        return m.uuid
    if g.uuid and m.gpu_instance_id is not None and m.compute_instance_id is not None:
        return f"MIG-{g.uuid}/{m.gpu_instance_id}/{m.compute_instance_id}"
    return None


def slice_name(m: MigInstance, memory_mib: int | None) -> str:
    """The MIG profile where the source names it, else the memory it is offered with."""
    if m.profile:
        return m.profile
    return f"{memory_mib / 1024:.0f}GB" if memory_mib else "MIG"


def held(resources: Mapping[str, Any]) -> tuple[list[str], int]:
    """What an attempt's reservation holds: the device addresses it was given, and how many
    GPUs it holds without addresses (placed before devices were assigned)."""
    addresses = [str(a) for a in resources.get("gpu_uuids") or ()]
    return addresses, max(0, int(resources.get("gpus") or 0) - len(addresses))


def free_devices(devices: Sequence[Device],
                 reservations: Iterable[Mapping[str, Any]]) -> list[Device]:
    """The devices no reservation holds. A reservation without addresses takes the first free
    devices (the count is all such an attempt recorded)."""
    free = list(devices)
    for resources in reservations:
        free = take(free, *held(resources))
    return free


def take(free: Sequence[Device], addresses: Iterable[str], anonymous: int = 0) -> list[Device]:
    """``free`` without ``addresses`` and without ``anonymous`` more of the first ones."""
    gone = set(addresses)
    left = [d for d in free if d.address not in gone]
    return left[anonymous:]


def groups(free: Sequence[Device]) -> list[list[Device]]:
    """Free devices by kind, in order of their first device: one offer each."""
    by_kind: dict[Kind, list[Device]] = {}
    for device in free:
        by_kind.setdefault(device.kind, []).append(device)
    return list(by_kind.values())


def choose(free: Sequence[Device], kind: Kind, count: int) -> list[Device] | None:
    """``count`` free devices of ``kind`` for one attempt, or None when there are fewer.

    Packs: whole GPUs are taken from the GPU with the lowest index up, so that a later job
    asking for several finds them side by side; slices from the GPU already most used (the
    fewest of its slices free), so that other GPUs' slices stay together."""
    fits = [d for d in free if d.kind == kind]
    if len(fits) < count:
        return None
    if kind[1] is not None:
        left = Counter(d.gpu_index for d in free)
        fits.sort(key=lambda d: (left[d.gpu_index], d.gpu_index if d.gpu_index is not None
                                 else -1))
    return fits[:count]


def weight(devices: Iterable[Device]) -> float:
    return sum(d.weight for d in devices)
