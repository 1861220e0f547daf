"""A node's hardware and what its probe measured: the value types the core judges
(``core.verification``, ``core.devices``) and the agent protocol carries (``protocol``
re-exports them). Pure data: every field but a GPU's ``name`` may be None when its source
did not say."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bourse.core.values import Wire


class MigInstance(Wire):
    """One MIG device (a GPU instance's compute instance), listed in the probe report."""

    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    index: int | None = None
    profile: str | None = None  # "3g.71gb" where the source names it (NVML), else None
    memory_mib: int | None = None
    multiprocessors: int | None = None
    uuid: str | None = None


class GpuInfo(Wire):
    """One GPU as the agent read it. Every field but ``name`` may be None: not reported by the
    source (``N/A``, ``[Not Supported]``) is None, never a guess."""

    model: str | None = None  # canonical id, None when the name is unknown to the catalogue
    name: str
    memory_mib: int | None = None
    uuid: str | None = None
    index: int | None = None
    pci_bus_id: str | None = None
    compute_capability: str | None = None  # "8.6"
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    mig_enabled: bool | None = None
    mig_pending: bool | None = None
    mig_instances: list[MigInstance] = Field(default_factory=list)
    ecc_enabled: bool | None = None
    ecc_uncorrectable_volatile: int | None = None
    ecc_uncorrectable_aggregate: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    retired_pages: int | None = None  # single + double bit, pre-Ampere boards
    retired_pages_pending: bool | None = None
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    clock_event_reasons: list[str] = Field(default_factory=list)  # active ones, idle excluded


class Tool(Wire):
    """An external program found on the node, with the version it printed."""

    name: str
    version: str | None = None
    path: str | None = None


class TorchInfo(Wire):
    version: str
    cuda: str | None = None  # torch.version.cuda: None for a CPU build
    cuda_available: bool = False
    device_count: int = 0


class HostInfo(Wire):
    hostname: str = ""
    cpu_model: str = ""
    cpu_physical_cores: int | None = None
    cpu_logical_cores: int = 0
    cpu_flags: list[str] = Field(default_factory=list)  # the ones that matter for placement
    memory_mib: int = 0
    disk_free_gib: float = 0.0
    work_dir: str = ""
    os: str = ""
    kernel: str = ""
    arch: str = ""
    python: str = ""
    machine_id: bool = False  # whether a machine id fed the fingerprint (the id stays local)
    tools: list[Tool] = Field(default_factory=list)  # docker, podman, nvidia-container-cli, nvcc
    torch: TorchInfo | None = None


class StorageResult(Wire):
    """Write, fsync and read back ``size_mb`` MB in ``path``: speeds, or the error."""

    path: str
    size_mb: int
    write_mb_s: float | None = None
    read_mb_s: float | None = None
    error: str | None = None


class Benchmark(Wire):
    """A matmul benchmark: ``device`` is "cpu" or "cuda:N", ``dtype`` e.g. float32, bfloat16."""

    device: str
    dtype: str
    size: int
    name: str | None = None  # the device's own name (torch.cuda.get_device_name)
    tflops: float | None = None
    seconds: float | None = None
    library: str = ""  # "numpy 2.1.0", "torch 2.4.0+cu121"
    error: str | None = None


ProbeSource = Literal[
    "nvml", "nvidia-smi-xml", "nvidia-smi-text", "nvidia-smi-csv", "nvidia-smi-table", "none"]


class ProbeReport(Wire):
    """Everything ``bourse agent probe`` measured, before anyone judged it
    (``bourse.core.verification`` does)."""

    version: int = 1
    probed_at: float = 0.0
    source: ProbeSource = "none"
    driver: str | None = None
    cuda: str | None = None
    gpus: list[GpuInfo] = Field(default_factory=list)
    gpu_errors: list[str] = Field(default_factory=list)  # why a GPU source was not used
    # no source read everything it shows: the first partial reading was kept (older agents:
    # False, and the verdict then says a richer source failed)
    gpu_partial: bool = False
    host: HostInfo = Field(default_factory=HostInfo)
    fingerprint: str = ""
    storage: StorageResult | None = None
    benchmarks: list[Benchmark] = Field(default_factory=list)
    duration_s: float = 0.0  # the whole probe, checks included
    checks_s: float = 0.0  # of which the storage and compute checks
    agent_version: str = ""


class Declared(Wire):
    """What a provider says a node has: ``gpus`` as a label such as "a100-80gb:8"."""

    gpus: str | None = None
    cpus: int | None = Field(default=None, ge=0)
    memory_gib: float | None = Field(default=None, ge=0)
    disk_gib: float | None = Field(default=None, ge=0)
    # the availability its provider promises (0.995 for 99.5%), compared with the measured
    # score (core.reliability.against_declared); never checked at verification
    sla: float | None = Field(default=None, gt=0, le=1)


CheckStatus = Literal["pass", "warn", "fail"]


class Check(Wire):
    name: str  # "gpu0.ecc", "storage", "declared.gpus"...
    status: CheckStatus
    reason: str
    measured: str | None = None
    expected: str | None = None


class VerificationReport(Wire):
    status: CheckStatus
    checks: list[Check] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # derived compatibility notes
    offers: list[str] = Field(default_factory=list)  # offerable units, MIG slices one each
    fingerprint: str = ""
