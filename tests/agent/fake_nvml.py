"""A stand-in for ``pynvml`` that replays a real ``nvidia-smi -q -x`` capture (tests/fixtures):
each GPU's utilisation, memory, power, temperature and the pids of its processes, as NVML's
calls would return them. NVML itself cannot load on these machines (no NVIDIA driver).

``pids`` maps the capture's pids to ours, so a job of the test can stand for a process of the
capture; ``missing`` names calls that answer NotSupported (as a board without power readings
does)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from defusedxml import ElementTree

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nvidia-smi"


class NVMLError(Exception):
    pass


def _number(text: str | None) -> float | None:
    if text is None or text.strip() in ("N/A", ""):
        return None
    return float(text.split()[0])


class ReplayNvml:
    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, capture: str, pids: dict[int, int] | None = None,
                 missing: tuple[str, ...] = ()) -> None:
        root = ElementTree.parse(FIXTURES / capture).getroot()
        self.gpus = [self._gpu(g, pids or {}) for g in root.findall("gpu")]
        self.missing = set(missing)
        self.calls: list[str] = []
        self.initialised = False

    @staticmethod
    def _gpu(gpu: Any, pids: dict[int, int]) -> SimpleNamespace:
        mib = 2**20
        procs = [int(p.findtext("pid")) for p in gpu.findall("processes/process_info")]
        return SimpleNamespace(
            uuid=gpu.findtext("uuid"), util=_number(gpu.findtext("utilization/gpu_util")),
            used=_number(gpu.findtext("fb_memory_usage/used")) * mib,
            total=_number(gpu.findtext("fb_memory_usage/total")) * mib,
            power=_number(gpu.findtext("power_readings/power_draw")
                          or gpu.findtext("gpu_power_readings/power_draw")),
            temp=_number(gpu.findtext("temperature/gpu_temp")),
            pids=[pids.get(p, p) for p in procs])

    def _answer(self, name: str, value: Any) -> Any:
        self.calls.append(name)
        if name in self.missing or value is None:
            raise NVMLError(f"{name}: Not Supported")
        return value

    def nvmlInit(self) -> None:
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        return self.gpus[index]

    def nvmlDeviceGetUUID(self, h: SimpleNamespace) -> bytes:
        return self._answer("uuid", h.uuid.encode())

    def nvmlDeviceGetUtilizationRates(self, h: SimpleNamespace) -> SimpleNamespace:
        return self._answer("util", SimpleNamespace(gpu=int(h.util), memory=0))

    def nvmlDeviceGetMemoryInfo(self, h: SimpleNamespace) -> SimpleNamespace:
        return self._answer("memory", SimpleNamespace(used=int(h.used), total=int(h.total),
                                                      free=int(h.total - h.used)))

    def nvmlDeviceGetPowerUsage(self, h: SimpleNamespace) -> int:
        return self._answer("power", None if h.power is None else int(h.power * 1000))

    def nvmlDeviceGetTemperature(self, h: SimpleNamespace, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self._answer("temperature", None if h.temp is None else int(h.temp))

    def nvmlDeviceGetComputeRunningProcesses(self, h: SimpleNamespace) -> list[Any]:
        return self._answer("compute", [SimpleNamespace(pid=p, usedGpuMemory=None)
                                        for p in h.pids])

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: SimpleNamespace) -> list[Any]:
        return self._answer("graphics", [])
