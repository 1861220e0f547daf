"""REST bodies of services (issue 20): a service's policy as the coordinator applies it, a
version to apply, and what is shown of a service, its versions and its decisions."""

from __future__ import annotations

import itertools
from typing import Any, Literal

from pydantic import Field, model_validator

from bourse.protocol.common import JobSpec, Wire

SERVICE_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
VersionState = Literal["starting", "canary", "stable", "rolled_back", "retired", "stopped"]


class ServicePolicy(Wire):
    """The ``service:`` section in the units the coordinator uses (seconds, fractions)."""

    port: int = Field(ge=1024, le=65535)
    readiness_path: str = Field(default="/", pattern=r"^/[\x21-\x7e]*$", max_length=1024)
    readiness_timeout_s: float = Field(default=5.0, gt=0, le=300)
    initial_delay_s: float = Field(default=0.0, ge=0, le=3600)
    min_replicas: int = Field(default=1, ge=0, le=1000)
    max_replicas: int = Field(default=1, ge=1, le=1000)
    target_rps: float | None = Field(default=None, gt=0)
    target_p99_ms: float | None = Field(default=None, gt=0, le=600_000)
    steps: list[int] = Field(default_factory=lambda: [10, 50, 100], min_length=1,
                             max_length=20)
    pause_s: float = Field(default=60.0, ge=0, le=86400)
    error_margin: float = Field(default=0.05, ge=0, le=1)
    p99_margin_ms: float = Field(default=200.0, ge=0)
    min_requests: int = Field(default=100, ge=1, le=1_000_000)
    ready_timeout_s: float = Field(default=600.0, gt=0, le=86400)

    @model_validator(mode="after")
    def _ordered(self) -> ServicePolicy:
        if self.max_replicas < self.min_replicas:
            raise ValueError(f"max_replicas {self.max_replicas} is below min_replicas "
                             f"{self.min_replicas}")
        steps = self.steps
        if steps[-1] != 100 or steps[0] < 1 or any(
                b <= a for a, b in itertools.pairwise(steps)):
            raise ValueError(f"steps {steps} must rise from 1 or more and end at 100")
        return self


class ServiceApply(Wire):
    """A version of a service: what each replica runs, and the policy. Applying the same
    version again changes nothing; a different one starts a rollout."""

    name: str = Field(pattern=SERVICE_NAME_PATTERN)
    job: JobSpec
    policy: ServicePolicy


class VersionView(Wire):
    number: int
    digest: str
    state: VersionState
    weight: int  # percent of the traffic now
    replicas: int  # running or starting
    ready: int
    figures: dict[str, Any] = Field(default_factory=dict)  # the gateway's last minute
    created_at: float
    reason: str | None = None


class ServiceEventView(Wire):
    id: int
    time: float
    kind: str
    version: int | None = None
    message: str
    data: dict[str, Any] = Field(default_factory=dict)


class ServiceView(Wire):
    name: str
    project: str
    state: Literal["running", "stopped"]
    url: str  # the gateway's path: /svc/<project>/<name>/
    stable: int | None = None
    canary: int | None = None
    step: int | None = None  # the canary's step index, while a rollout runs
    versions: list[VersionView] = Field(default_factory=list)
    created_at: float


class ServiceDetail(ServiceView):
    events: list[ServiceEventView] = Field(default_factory=list)
    series: list[dict[str, Any]] = Field(default_factory=list)  # figures rows, for charts


class ServiceList(Wire):
    services: list[ServiceView]
