"""GPUs through NVML (``nvidia-ml-py``), the library nvidia-smi itself is built on.

Preferred over parsing nvidia-smi because NVML's API is stable where the tool's output drifts.
The module is passed in (``pynvml`` by default) so tests can drive the mapping with values read
off a real capture; on a machine without the NVIDIA driver ``nvmlInit`` fails with
``NVMLError_LibraryNotFound`` and :func:`read_nvml` returns None: the probe falls through to
nvidia-smi.

Each query is asked separately: a board that does not support one (ECC on GeForce, remapped rows
before Ampere, MIG outside A100/H100/H200...) answers NotSupported, which becomes None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bourse.agent.probe.reading import SmiOutputError, SmiReading, each_gpu, gpu, reading
from bourse.agent.probe.values import total
from bourse.protocol.common import GpuInfo, MigInstance

_UNAVAILABLE = ("LibraryNotFound", "DriverNotLoaded", "NoPermission", "Uninitialized")
_EVENT_BITS = {  # nvmlClocksEventReason* bits (nvml.h), idle (0x1) left out
    0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}


def load_pynvml() -> Any:
    try:
        import pynvml  # type: ignore[import-untyped]
    except ImportError:
        return None
    return pynvml


def read_nvml(nvml: Any = None) -> SmiReading | None:
    """GPUs as NVML reports them; None when NVML cannot be used on this machine."""
    nvml = nvml if nvml is not None else load_pynvml()
    if nvml is None:
        return None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        if any(word in type(exc).__name__ for word in _UNAVAILABLE):
            return None
        raise SmiOutputError(f"NVML: {exc}") from None
    try:
        return _read(nvml)
    except nvml.NVMLError as exc:
        raise SmiOutputError(f"NVML: {exc}") from None
    finally:
        ask(nvml, nvml.nvmlShutdown)


def ask(nvml: Any, call: Callable[..., Any], *args: Any) -> Any:
    """One NVML query; None when the board or driver does not support it."""
    try:
        return call(*args)
    except nvml.NVMLError:
        return None


def text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def _read(nvml: Any) -> SmiReading:
    driver = text(nvml.nvmlSystemGetDriverVersion())
    cuda_int = ask(nvml, nvml.nvmlSystemGetCudaDriverVersion)
    cuda = f"{cuda_int // 1000}.{cuda_int % 1000 // 10}" if cuda_int else None
    count = nvml.nvmlDeviceGetCount()
    gpus, problems = each_gpu("nvml", range(count), lambda i, _: _gpu(
        nvml, i, nvml.nvmlDeviceGetHandleByIndex(i)))  # a lost GPU costs itself, not the rest
    return reading("nvml", driver, cuda, gpus, problems=problems)


def _gpu(nvml: Any, index: int, h: Any) -> GpuInfo:
    memory = ask(nvml, nvml.nvmlDeviceGetMemoryInfo, h)
    cc = ask(nvml, nvml.nvmlDeviceGetCudaComputeCapability, h)
    pci = ask(nvml, nvml.nvmlDeviceGetPciInfo, h)
    mig = ask(nvml, nvml.nvmlDeviceGetMigMode, h)
    ecc = ask(nvml, nvml.nvmlDeviceGetEccMode, h)
    rows = ask(nvml, nvml.nvmlDeviceGetRemappedRows, h)
    return gpu(
        text(nvml.nvmlDeviceGetName(h)), memory.total // 2**20 if memory else None,
        uuid=text(ask(nvml, nvml.nvmlDeviceGetUUID, h)), index=index,
        pci_bus_id=text(pci.busId) if pci else None,
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
        pcie_gen_current=ask(nvml, nvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
        pcie_gen_max=ask(nvml, nvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
        pcie_width_current=ask(nvml, nvml.nvmlDeviceGetCurrPcieLinkWidth, h),
        pcie_width_max=ask(nvml, nvml.nvmlDeviceGetMaxPcieLinkWidth, h),
        mig_enabled=bool(mig[0]) if mig else None, mig_pending=bool(mig[1]) if mig else None,
        mig_instances=_migs(nvml, h) if mig and mig[0] else [],
        ecc_enabled=bool(ecc[0]) if ecc else None,
        ecc_uncorrectable_volatile=_ecc(nvml, h, nvml.NVML_VOLATILE_ECC),
        ecc_uncorrectable_aggregate=_ecc(nvml, h, nvml.NVML_AGGREGATE_ECC),
        remapped_rows_uncorrectable=rows[1] if rows else None,
        remapped_rows_pending=bool(rows[2]) if rows else None,
        remapped_rows_failure=bool(rows[3]) if rows else None,
        retired_pages=_retired(nvml, h),
        retired_pages_pending=_flag(ask(nvml, nvml.nvmlDeviceGetRetiredPagesPendingStatus, h)),
        power_limit_w=_watts(ask(nvml, nvml.nvmlDeviceGetPowerManagementLimit, h)),
        power_default_limit_w=_watts(
            ask(nvml, nvml.nvmlDeviceGetPowerManagementDefaultLimit, h)),
        clock_event_reasons=_reasons(
            ask(nvml, nvml.nvmlDeviceGetCurrentClocksThrottleReasons, h)),
    )


def _flag(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else milliwatts / 1000


def _ecc(nvml: Any, h: Any, counter: int) -> int | None:
    value = ask(nvml, nvml.nvmlDeviceGetTotalEccErrors, h,
                 nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, counter)
    return None if value is None else int(value)


def _retired(nvml: Any, h: Any) -> int | None:
    pages = [ask(nvml, nvml.nvmlDeviceGetRetiredPages, h, cause) for cause in (
        nvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
        nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)]
    return total(*(None if p is None else len(p) for p in pages))


def _reasons(mask: Any) -> list[str]:
    return [] if not mask else [name for bit, name in _EVENT_BITS.items() if mask & bit]


def _migs(nvml: Any, h: Any) -> list[MigInstance]:
    found = []
    for slot in range(ask(nvml, nvml.nvmlDeviceGetMaxMigDeviceCount, h) or 0):
        mig = ask(nvml, nvml.nvmlDeviceGetMigDeviceHandleByIndex, h, slot)
        if mig is not None:
            found.append(_mig(nvml, slot, mig))
    return found


def _mig(nvml: Any, slot: int, m: Any) -> MigInstance:
    """A MIG device; its name ends in the profile ("NVIDIA A100-SXM4-40GB MIG 3g.20gb")."""
    name = text(ask(nvml, nvml.nvmlDeviceGetName, m)) or ""
    memory = ask(nvml, nvml.nvmlDeviceGetMemoryInfo, m)
    attributes = ask(nvml, nvml.nvmlDeviceGetAttributes, m)
    return MigInstance(
        index=slot, profile=name.rsplit("MIG ", 1)[1] if "MIG " in name else None,
        gpu_instance_id=ask(nvml, nvml.nvmlDeviceGetGpuInstanceId, m),
        compute_instance_id=ask(nvml, nvml.nvmlDeviceGetComputeInstanceId, m),
        memory_mib=memory.total // 2**20 if memory else None,
        multiprocessors=attributes.multiprocessorCount if attributes else None,
        uuid=text(ask(nvml, nvml.nvmlDeviceGetUUID, m)),
    )
