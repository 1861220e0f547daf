"""Resource samples: what the agent measures every few seconds, on the wire and in the API.

One :class:`Sample` shape serves a job (its process tree, its GPUs, its work dir) and a whole
node (the machine, every GPU, the input cache). Every measure is optional: a node without NVML
sends no GPUs, a process that vanished between two readings has no CPU share. Downsampled
samples served by the API carry ``period_s`` (60: the mean of a minute's raw samples).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bourse.protocol.common import NO_NUL, JobId, Wire

MAX_BYTES = 2**62
MAX_GPUS = 64
MAX_SAMPLES = 10_000  # per message


class GpuSample(Wire):
    """One GPU at one instant, as NVML reports it."""

    index: int = Field(ge=0, le=1024)
    uuid: str | None = Field(default=None, max_length=128, pattern=NO_NUL)
    utilization_percent: float | None = Field(default=None, ge=0, le=100)
    memory_used_mib: float | None = Field(default=None, ge=0, le=2**40)
    memory_total_mib: float | None = Field(default=None, ge=0, le=2**40)
    power_w: float | None = Field(default=None, ge=0, le=100_000)
    temperature_c: float | None = Field(default=None, ge=-100, le=300)


class DiskSample(Wire):
    """The filesystem holding the work dir and/or the cache (one entry per filesystem)."""

    label: str = Field(min_length=1, max_length=64, pattern=NO_NUL)  # "work dir", "cache"...
    used_bytes: int = Field(ge=0, le=MAX_BYTES)
    total_bytes: int = Field(ge=0, le=MAX_BYTES)

    @property
    def fraction(self) -> float:
        return self.used_bytes / self.total_bytes if self.total_bytes else 0.0


class Sample(Wire):
    """A job's or a node's resources at ``time`` (the agent's clock, UNIX seconds).

    For a job: ``cpu_percent`` is its process tree's CPU use since the previous sample (100 is
    one core), ``memory_bytes`` their resident memory, ``work_bytes`` the size of the attempt's
    directory, ``gpus`` the GPUs it uses. For a node: the machine's CPU (100 is one core) and
    used memory, ``cache_bytes`` the input cache, ``gpus`` every GPU, ``disks`` the
    filesystems of the work dir and cache."""

    time: float = Field(ge=0, le=2**40)
    cpu_percent: float | None = Field(default=None, ge=0, le=100_000)
    memory_bytes: int | None = Field(default=None, ge=0, le=MAX_BYTES)
    memory_total_bytes: int | None = Field(default=None, ge=0, le=MAX_BYTES)
    processes: int | None = Field(default=None, ge=0, le=10_000_000)
    work_bytes: int | None = Field(default=None, ge=0, le=MAX_BYTES)
    cache_bytes: int | None = Field(default=None, ge=0, le=MAX_BYTES)
    gpus: list[GpuSample] = Field(default_factory=list, max_length=MAX_GPUS)
    disks: list[DiskSample] = Field(default_factory=list, max_length=8)


class JobSample(Sample):
    job_id: JobId
    attempt: int = Field(ge=1, le=2**31 - 1)


class SampleView(Sample):
    """A stored sample: raw (``period_s`` 0) or the mean over ``period_s`` seconds from
    ``time``."""

    period_s: float = 0.0
    attempt: int | None = None
    rank: int | None = None  # a job's sample: the gang member (0 for a one-node job)


class StallView(Wire):
    """Why a running job looks stuck: ``gpu_idle`` (its GPUs sat idle) or ``no_progress`` (it
    printed nothing and used next to no CPU), over the window that started at ``since``."""

    kind: str
    since: float
    message: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    attempt: int | None = None


class MetricsView(Wire):
    """``GET /api/v1/jobs/{id}/metrics`` and ``/nodes/{id}/metrics``: samples oldest first."""

    job_id: str | None = None
    node_id: str | None = None
    samples: list[SampleView]
    stalled: StallView | None = None  # a job's stall evidence, while it lasts
