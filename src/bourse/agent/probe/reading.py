"""What every GPU source produces: the driver, its CUDA version and the GPUs, typed.

The four nvidia-smi parsers and the NVML reader all end in :func:`reading` and :func:`gpu`, so
that the catalogue lookup, the compute-capability fallback and the driver's CUDA are derived
the same way whatever the source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bourse.agent.probe.values import clean, compute_capability, driver_cuda, model_of
from bourse.core.errors import BourseError
from bourse.protocol.common import GpuInfo, ProbeSource


class SmiOutputError(BourseError):
    """nvidia-smi (or NVML) answered with something this probe will not read."""


@dataclass(frozen=True, slots=True)
class SmiReading:
    source: ProbeSource
    driver: str | None
    cuda: str | None
    gpus: tuple[GpuInfo, ...]


def reading(
    source: ProbeSource, driver: str | None, cuda: str | None, gpus: list[GpuInfo]
) -> SmiReading:
    """A reading; the CUDA version comes from the driver table when the source lacks it."""
    driver = clean(driver)
    return SmiReading(source, driver, clean(cuda) or driver_cuda(driver), tuple(gpus))


def gpu(name: str | None, memory_mib: int | None, **fields: Any) -> GpuInfo:
    """A GPU with its catalogue model, and the catalogue's compute capability when the source
    did not report one. An unknown name keeps the raw name and a null model."""
    raw = clean(name) or "unknown"
    model = model_of(raw, memory_mib) if clean(name) else None
    fields["compute_capability"] = fields.get("compute_capability") or compute_capability(model)
    return GpuInfo(model=model, name=raw, memory_mib=memory_mib, **fields)
