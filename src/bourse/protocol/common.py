"""Models used both on the REST API and on the agent channel."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bourse.core.compute import Compute
from bourse.core.retry import RetryPolicy

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
NO_NUL = r"^[^\x00]*$"  # a NUL byte cannot cross exec() or PostgreSQL: refuse it at the door
REDACTED = "[redacted]"
ID_PATTERN = r"^[A-Za-z0-9_.:-]+$"
JobId = Annotated[str, Field(min_length=1, max_length=64, pattern=ID_PATTERN)]
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=256)]


class Wire(BaseModel):
    """Base of every wire model: unknown fields are ignored, instances are immutable."""

    model_config = ConfigDict(extra="ignore", frozen=True)


DataName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")]
SecretName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
DataUri = Annotated[str, Field(min_length=1, max_length=2048, pattern=NO_NUL)]


def _check_uri(value: str) -> str:
    from bourse.storage.uri import parse_uri  # the one URI grammar

    parse_uri(value, field="uri")
    return value


MAX_PORTS = 8


class Port(Wire):
    """A port the job serves on 127.0.0.1, proxied by the coordinator at
    ``/jobs/{id}/ports/{number}/``. ``path``: ``strip`` forwards the path below that prefix
    (``/index.html``), ``keep`` forwards it whole, for servers told their base URL
    (``tensorboard --path_prefix /jobs/{id}/ports/6006``)."""

    number: int = Field(ge=1024, le=65535)
    path: Literal["strip", "keep"] = "strip"

    @model_validator(mode="before")
    @classmethod
    def _bare_number(cls, value: object) -> object:
        return {"number": value} if isinstance(value, int) else value


def parse_port(text: str) -> Port:
    """``6006`` or ``6006:keep`` (the CLI's and the app API's spelling)."""
    number, _, path = text.strip().partition(":")
    if not number.isdigit() or not 1024 <= int(number) <= 65535 or path not in (
            "", "strip", "keep"):
        raise ValueError(f"port {text!r}: write a number from 1024 to 65535, optionally "
                         "followed by :keep or :strip")
    return Port(number=int(number), path="keep" if path == "keep" else "strip")


MAX_PENDING_TIMEOUT_S = 365 * 86400.0


class JobSpec(Wire):
    """What to run: a command in a code bundle's directory, with an environment and a Compute.

    Data: ``inputs`` are prefetched to the node before the job starts (the job reads
    ``BOURSE_INPUT_<NAME>``), ``outputs`` are local directories (``BOURSE_OUTPUT_<NAME>``)
    uploaded to their URIs when the job ends, and ``checkpoint`` is a prefix the job writes to
    directly (``BOURSE_CHECKPOINT_URI``; default: a per-job prefix in the exchange's store).
    ``secrets`` names project secrets (``bourse secrets set``) given to the job as variables.
    """

    command: list[Annotated[str, Field(max_length=65536, pattern=NO_NUL)]] = Field(
        min_length=1, max_length=4096)
    name: Annotated[str, Field(max_length=200, pattern=NO_NUL)] | None = None
    env: dict[EnvName, Annotated[str, Field(max_length=131072, pattern=NO_NUL)]] = Field(
        default_factory=dict, max_length=1024)
    compute: Compute = Field(default_factory=Compute)
    bundle: Sha256 | None = None
    workdir: Annotated[str, Field(max_length=1024, pattern=r"^[^/].*$|^$")] = ""
    max_retries: int = Field(default=3, ge=0, le=100, strict=True)  # `true` is no count
    inputs: dict[DataName, DataUri] = Field(default_factory=dict, max_length=64)
    outputs: dict[DataName, DataUri] = Field(default_factory=dict, max_length=64)
    checkpoint: DataUri | None = None
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    # an app's jobs: the run they belong to, the app (its file) and the stage (None: the
    # run's flow driver, for a detached run)
    run: JobId | None = None
    app: Annotated[str, Field(max_length=200, pattern=NO_NUL)] | None = None
    stage: Annotated[str, Field(max_length=200, pattern=NO_NUL)] | None = None
    # names of ``env`` variables whose values are secrets: given to the job, never shown by
    # the API (JobView.spec carries them redacted)
    secrets: list[EnvName] = Field(default_factory=list, max_length=64)
    # the project's secrets the job gets as environment variables of the same names
    project_secrets: list[SecretName] = Field(default_factory=list, max_length=64)
    ports: list[Port] = Field(default_factory=list, max_length=MAX_PORTS)
    # how long the job may wait to be placed, each time it waits; None: as long as it takes
    pending_timeout_s: float | None = Field(default=None, gt=0, le=MAX_PENDING_TIMEOUT_S,
                                            allow_inf_nan=False)

    @field_validator("ports")
    @classmethod
    def _distinct_ports(cls, value: list[Port]) -> list[Port]:
        numbers = [p.number for p in value]
        if len(set(numbers)) != len(numbers):
            raise ValueError(f"ports {numbers} declare a port twice; declare each once")
        return value

    def port(self, number: int) -> Port | None:
        return next((p for p in self.ports if p.number == number), None)

    @field_validator("inputs", "outputs")
    @classmethod
    def _uris(cls, value: dict[str, str]) -> dict[str, str]:
        for uri in value.values():
            _check_uri(uri)
        return value

    @field_validator("checkpoint")
    @classmethod
    def _checkpoint(cls, value: str | None) -> str | None:
        return None if value is None else _check_uri(value)

    @model_validator(mode="after")
    def _secrets_in_env(self) -> JobSpec:
        missing = [name for name in self.secrets if name not in self.env]
        if missing:
            raise ValueError(f"secrets {missing} are not in env: a secret names an env variable")
        return self

    def redacted(self) -> JobSpec:
        """The spec as the API shows it: secret env values replaced."""
        if not self.secrets:
            return self
        return self.model_copy(update={"env": {
            k: REDACTED if k in self.secrets else v for k, v in self.env.items()}})


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


Label = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]


class Capabilities(Wire):
    """What a node has, as its agent measured it."""

    hostname: str = ""
    cpus: int = Field(ge=0)
    cpu_model: str = ""
    memory_gib: float = Field(ge=0)
    disk_free_gib: float = Field(ge=0)
    gpus: list[GpuInfo] = Field(default_factory=list)
    driver: str | None = None
    os: str = ""
    python: str = ""
    agent_version: str = ""
    cuda: str | None = None  # the newest CUDA the driver supports ("CUDA Version")
    fingerprint: str | None = None  # sha256 of the hardware identity, see agent.probe
    # spot: an interruptible node may be reclaimed (with notice) and is sold at its spot price
    interruptible: bool = False
    spot_price: float | None = Field(default=None, gt=0, le=10_000, allow_inf_nan=False)
    provider: Label | None = None  # who sells it, for placement's blocklist
    region: Label | None = None  # where the node is (a cloud region or a site name)
    engines: list[str] = Field(default_factory=list)  # docker, podman, nvidia-container-cli


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
    # the GPU facts are a partial reading, kept because no source read all it shows (what it
    # could not read is among gpu_errors)
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


class AttemptRef(Wire):
    job_id: JobId
    attempt: int = Field(ge=1, le=2**31 - 1)
