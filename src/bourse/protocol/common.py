"""Models used both on the REST API and on the agent channel."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from bourse.core.compute import Compute
from bourse.core.hardware import (
    Benchmark,
    Check,
    CheckStatus,
    Declared,
    GpuInfo,
    HostInfo,
    MigInstance,
    ProbeReport,
    ProbeSource,
    StorageResult,
    Tool,
    TorchInfo,
    VerificationReport,
)
from bourse.core.paths import inside
from bourse.core.retry import RetryPolicy
from bourse.core.uri import parse_uri
from bourse.core.values import Wire

# the hardware and probe reports are value types of the core, and wire models as they are
__all__ = ["Benchmark", "Check", "CheckStatus", "Declared", "GpuInfo", "HostInfo",
           "MigInstance", "ProbeReport", "ProbeSource", "StorageResult", "Tool", "TorchInfo",
           "VerificationReport", "Wire"]

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
NO_NUL = r"^[^\x00]*$"  # a NUL byte cannot cross exec() or PostgreSQL: refuse it at the door
REDACTED = "[redacted]"
ID_PATTERN = r"^[A-Za-z0-9_.:-]+$"
JobId = Annotated[str, Field(min_length=1, max_length=64, pattern=ID_PATTERN)]
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=256)]


DataName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")]
SecretName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
DataUri = Annotated[str, Field(min_length=1, max_length=2048, pattern=NO_NUL)]


def _check_uri(value: str) -> str:
    parse_uri(value, field="uri")  # the one URI grammar
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
    workdir: Annotated[str, Field(max_length=1024)] = ""  # inside the bundle: core.paths
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

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, value: str) -> str:
        return inside(value, field="workdir", root="the job's code bundle")

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


Label = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
# hosts that reach each other (a fleet, a cluster, a cloud zone): gangs are placed in one
Network = Annotated[str, Field(min_length=1, max_length=128,
                               pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")]


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
    job_python: Tool | None = None  # the Python jobs run with (`bourse agent --python`)
    network: Network | None = None  # `bourse agent --network`: gangs run within one
    address: str | None = Field(default=None, max_length=64)  # where its gang peers dial it

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        return None if value is None else ip_literal(value)


def ip_literal(value: str) -> str:
    """An IPv4 or IPv6 address as written (``10.0.0.2``), or a clear error."""
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        raise ValueError(f"{value!r:.70} is not an IP address (write e.g. 10.0.0.2)") from None


class AttemptRef(Wire):
    job_id: JobId
    attempt: int = Field(ge=1, le=2**31 - 1)
