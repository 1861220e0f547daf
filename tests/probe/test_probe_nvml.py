"""The NVML reader. No NVML library loads here, so the "library missing" path runs for real;
the mapping is driven by a stand-in module answering with the values of a real capture
(txt-a10-drv535.txt: NVIDIA A10, driver 535.129.03, CUDA 12.2)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from bourse.agent.probe.nvml import load_pynvml, read_nvml
from bourse.agent.probe.reading import SmiOutputError


def test_without_the_nvidia_driver_nvml_is_skipped() -> None:
    pynvml = load_pynvml()
    assert pynvml is not None  # nvidia-ml-py installs without a GPU
    assert read_nvml(pynvml) is None


class NotSupported(Exception):
    pass


class A10:
    """Answers as NVML would for the A10 of txt-a10-drv535.txt; ECC-page retirement and
    MIG are NotSupported there, as on the real board."""

    NVMLError = Exception
    NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1, 1
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1

    def __init__(self) -> None:
        self.shut = False

    def __getattr__(self, name: str) -> Any:
        def unsupported(*_: Any) -> Any:
            raise NotSupported(name)
        return unsupported

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: self.shut = True
    def nvmlSystemGetDriverVersion(self) -> str: return "535.129.03"
    def nvmlSystemGetCudaDriverVersion(self) -> int: return 12020
    def nvmlDeviceGetCount(self) -> int: return 1
    def nvmlDeviceGetHandleByIndex(self, i: int) -> str: return f"h{i}"
    def nvmlDeviceGetName(self, h: str) -> bytes: return b"NVIDIA A10"
    def nvmlDeviceGetUUID(self, h: str) -> str: return "GPU-73d12ef7-f589-f867-4259-c7090ab44736"
    def nvmlDeviceGetMemoryInfo(self, h: str) -> Any: return SimpleNamespace(total=23028 * 2**20)
    def nvmlDeviceGetCudaComputeCapability(self, h: str) -> tuple[int, int]: return (8, 6)
    def nvmlDeviceGetPciInfo(self, h: str) -> Any: return SimpleNamespace(busId=b"00000000:07:00.0")
    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: str) -> int: return 4
    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: str) -> int: return 4
    def nvmlDeviceGetCurrPcieLinkWidth(self, h: str) -> int: return 16
    def nvmlDeviceGetMaxPcieLinkWidth(self, h: str) -> int: return 16
    def nvmlDeviceGetEccMode(self, h: str) -> list[int]: return [1, 1]
    def nvmlDeviceGetTotalEccErrors(self, h: str, kind: int, counter: int) -> int: return 0
    def nvmlDeviceGetRemappedRows(self, h: str) -> tuple[int, ...]: return (0, 4, 1, 0)
    def nvmlDeviceGetPowerManagementLimit(self, h: str) -> int: return 150000
    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: str) -> int: return 150000
    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: str) -> int: return 0x1  # idle


def test_nvml_values_map_like_the_capture() -> None:
    nvml = A10()
    nvml.NVMLError = NotSupported
    found = read_nvml(nvml)
    assert found is not None and nvml.shut
    assert (found.source, found.driver, found.cuda) == ("nvml", "535.129.03", "12.2")
    (gpu,) = found.gpus
    assert (gpu.model, gpu.name, gpu.memory_mib, gpu.compute_capability) == (
        "a10", "NVIDIA A10", 23028, "8.6")
    assert (gpu.pcie_gen_current, gpu.pcie_width_max, gpu.pci_bus_id) == (4, 16, "00000000:07:00.0")
    assert (gpu.ecc_enabled, gpu.ecc_uncorrectable_volatile) == (True, 0)
    assert (gpu.remapped_rows_uncorrectable, gpu.remapped_rows_pending,
            gpu.remapped_rows_failure) == (4, True, False)
    assert (gpu.mig_enabled, gpu.retired_pages, gpu.power_limit_w) == (None, None, 150.0)
    assert gpu.clock_event_reasons == []


def test_an_nvml_failure_after_init_is_an_error_to_report() -> None:
    nvml = A10()
    nvml.NVMLError = NotSupported
    nvml.nvmlDeviceGetCount = lambda: (_ for _ in ()).throw(NotSupported("GPU is lost"))  # type: ignore[method-assign]
    with pytest.raises(SmiOutputError, match="NVML: GPU is lost"):
        read_nvml(nvml)
