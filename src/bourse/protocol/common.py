"""Models used both on the REST API and on the agent channel."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from bourse.core.compute import Compute

JobId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=256)]


class Wire(BaseModel):
    """Base of every wire model: unknown fields are ignored, instances are immutable."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class JobSpec(Wire):
    """What to run: a command in a code bundle's directory, with an environment and a Compute."""

    command: list[Annotated[str, Field(max_length=65536)]] = Field(min_length=1, max_length=4096)
    name: Annotated[str, Field(max_length=200)] | None = None
    env: dict[EnvName, Annotated[str, Field(max_length=131072)]] = Field(
        default_factory=dict, max_length=1024)
    compute: Compute = Field(default_factory=Compute)
    bundle: Sha256 | None = None
    workdir: Annotated[str, Field(max_length=1024, pattern=r"^[^/].*$|^$")] = ""
    max_retries: int = Field(default=3, ge=0, le=100)


class GpuInfo(Wire):
    model: str | None = None  # canonical id, None when the name is unknown to the catalogue
    name: str
    memory_mib: int | None = None
    uuid: str | None = None


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


class AttemptRef(Wire):
    job_id: JobId
    attempt: int = Field(ge=1)
