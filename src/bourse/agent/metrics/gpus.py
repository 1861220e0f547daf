"""GPU utilisation, memory, power and temperature through NVML, behind a one-method seam.

:class:`NvmlGpus` asks ``pynvml`` (``nvidia-ml-py``, passed in so tests can drive it with a
stand-in replaying a real capture) and says which processes use each GPU, so a job's GPUs are
the ones its processes hold. :func:`open_gpu_meter` gives :class:`NoGpus` on a machine where
NVML does not load (no NVIDIA driver): the node's samples then carry no GPUs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from bourse.agent.probe.nvml import ask, load_pynvml, text
from bourse.protocol.metrics import GpuSample

log = logging.getLogger(__name__)
MIB = 2**20


@dataclass(frozen=True)
class GpuReading:
    sample: GpuSample
    pids: frozenset[int]  # processes with a context on it (compute or graphics)


class GpuMeter(Protocol):
    def read(self) -> list[GpuReading]: ...

    def close(self) -> None: ...


class NoGpus:
    """A node without NVML."""

    def read(self) -> list[GpuReading]:
        return []

    def close(self) -> None:
        return None


def open_gpu_meter(nvml: Any = None) -> GpuMeter:
    """NVML when it loads and initialises here, else :class:`NoGpus`."""
    nvml = nvml if nvml is not None else load_pynvml()
    if nvml is None:
        return NoGpus()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        log.info("no GPU metrics: NVML is not available here (%s)", exc)
        return NoGpus()
    return NvmlGpus(nvml)


class NvmlGpus:
    """Reads every GPU; an initialised NVML is handed in and shut down by :meth:`close`."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml

    def read(self) -> list[GpuReading]:
        nvml = self.nvml
        try:
            count = nvml.nvmlDeviceGetCount()
            return [self._gpu(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
        except nvml.NVMLError as exc:  # a GPU fell off the bus, the driver was unloaded...
            log.warning("NVML failed while sampling GPUs: %s", exc)
            return []

    def _gpu(self, index: int, h: Any) -> GpuReading:
        nvml = self.nvml
        rates = ask(nvml, nvml.nvmlDeviceGetUtilizationRates, h)
        memory = ask(nvml, nvml.nvmlDeviceGetMemoryInfo, h)
        power = ask(nvml, nvml.nvmlDeviceGetPowerUsage, h)
        temperature = ask(nvml, nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU)
        sample = GpuSample(
            index=index, uuid=text(ask(nvml, nvml.nvmlDeviceGetUUID, h)),
            utilization_percent=None if rates is None else float(rates.gpu),
            memory_used_mib=None if memory is None else memory.used / MIB,
            memory_total_mib=None if memory is None else memory.total / MIB,
            power_w=None if power is None else power / 1000,
            temperature_c=None if temperature is None else float(temperature))
        return GpuReading(sample, self._pids(h))

    def _pids(self, h: Any) -> frozenset[int]:
        nvml = self.nvml
        found: set[int] = set()
        for call in (nvml.nvmlDeviceGetComputeRunningProcesses,
                     nvml.nvmlDeviceGetGraphicsRunningProcesses):
            found.update(int(p.pid) for p in ask(nvml, call, h) or ())
        return frozenset(found)

    def close(self) -> None:
        ask(self.nvml, self.nvml.nvmlShutdown)
