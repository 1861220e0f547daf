"""What every GPU source produces: the driver, its CUDA version and the GPUs, typed.

The four nvidia-smi parsers and the NVML reader all end in :func:`reading` and :func:`gpu`, so
that the catalogue lookup, the compute-capability fallback and the driver's CUDA are derived
the same way whatever the source.

A reading also says what it could not read (``problems``): a GPU whose block a parser failed on
(:func:`each_gpu` leaves it out and keeps the others), a GPU without a name or memory, fewer
GPUs than the output says are attached. The probe then tries the next source and, when none
reads everything, keeps the first reading and reports the problems.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from bourse.agent.probe.values import clean, compute_capability, driver_cuda, integer, model_of
from bourse.core.errors import BourseError
from bourse.protocol.common import GpuInfo, ProbeSource

T = TypeVar("T")
COMMAND: dict[ProbeSource, str] = {
    "nvml": "NVML", "nvidia-smi-xml": "nvidia-smi -q -x", "nvidia-smi-text": "nvidia-smi -q",
    "nvidia-smi-csv": "nvidia-smi --query-gpu", "nvidia-smi-table": "nvidia-smi",
    "none": "no GPU source",
}


class SmiOutputError(BourseError):
    """nvidia-smi (or NVML) answered with something this probe will not read."""


@dataclass(frozen=True, slots=True)
class SmiReading:
    source: ProbeSource
    driver: str | None
    cuda: str | None
    gpus: tuple[GpuInfo, ...]
    problems: tuple[str, ...] = ()  # what the source showed but this probe could not read


def reading(
    source: ProbeSource, driver: str | None, cuda: str | None, gpus: list[GpuInfo], *,
    attached: str | None = None, problems: Sequence[str] = (),
) -> SmiReading:
    """A reading; the CUDA version comes from the driver table when the source lacks it.
    ``attached`` is the GPU count the output states, where it states one."""
    driver = clean(driver)
    found = [*problems, *(p for g in gpus if (p := _missing(source, g))),
             *_short(source, integer(attached), len(gpus))]
    return SmiReading(source, driver, clean(cuda) or driver_cuda(driver), tuple(gpus),
                      tuple(found))


def gpu(name: str | None, memory_mib: int | None, **fields: Any) -> GpuInfo:
    """A GPU with its catalogue model, and the catalogue's compute capability when the source
    did not report one. An unknown name keeps the raw name and a null model."""
    raw = clean(name) or "unknown"
    model = model_of(raw, memory_mib) if clean(name) else None
    fields["compute_capability"] = fields.get("compute_capability") or compute_capability(model)
    return GpuInfo(model=model, name=raw, memory_mib=memory_mib, **fields)


def each_gpu(source: ProbeSource, items: Iterable[T],
             read: Callable[[int, T], GpuInfo]) -> tuple[list[GpuInfo], list[str]]:
    """``read(index, item)`` for each GPU's block, and what could not be read: a block a parser
    fails on is left out and named, and the other GPUs are kept."""
    gpus: list[GpuInfo] = []
    problems: list[str] = []
    for index, item in enumerate(items):
        try:
            gpus.append(read(index, item))
        except Exception as exc:  # untrusted output: a parser's blind spot costs one GPU only
            problems.append(f"{COMMAND[source]}: GPU {index} could not be read "
                            f"({type(exc).__name__}: {str(exc)[:200]}); left out")
    return gpus, problems


def _missing(source: ProbeSource, found: GpuInfo) -> str | None:
    missing = [what for what, absent in (("name", found.name == "unknown"),
                                         ("memory total", found.memory_mib is None)) if absent]
    if not missing:
        return None
    where = f"GPU {found.index}" + (f" ({found.pci_bus_id})" if found.pci_bus_id else "")
    return f"{COMMAND[source]}: {where} shows no {' and no '.join(missing)}"


def _short(source: ProbeSource, attached: int | None, read: int) -> list[str]:
    if attached is None or attached <= read:
        return []
    return [f"{COMMAND[source]}: says {attached} GPUs are attached but shows {read} (the "
            "output ends early or names GPUs this probe cannot read)"]
