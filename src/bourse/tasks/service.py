"""``service``: a task file's section for a long-running server (issue 20's `bourse serve`).

`bourse serve FILE` runs it (`bourse run` refuses a file that has one): the port it serves,
how it is known to be ready, how many replicas, what each needs, how a new version takes over
traffic and when it is rolled back (docs/serving.md).

    service:
      port: 8000
      readiness: /health                # or {path: /health, timeout: 5s, initial_delay: 1m}
      replicas: {min: 1, max: 4}        # or a number: exactly that many
      resources: {gpu: l4}              # per replica; default: the task's resources
      rollout: {steps: [10, 50, 100]}   # percent of traffic at each step; ends at 100
      # rollback rules: rollout: {max_error_increase: 5, max_p99_increase: 200ms,
      #                           min_requests: 100, ready_timeout: 10m}
"""

from __future__ import annotations

import itertools
from typing import Annotated, Any

from pydantic import Field, StrictFloat, StrictInt, StrictStr, field_validator, model_validator

from bourse.core.errors import InvalidInput
from bourse.core.units import parse_duration
from bourse.tasks.resources import Resources, Strict

MAX_REPLICAS = 1000
ReadinessPath = Annotated[str, Field(pattern=r"^/[\x21-\x7e]*$", max_length=1024)]
Duration = StrictStr | StrictInt | StrictFloat
Percent = Annotated[int, Field(ge=1, le=100, strict=True)]


def _duration(value: Duration, field: str, at_most: float) -> Duration:
    parse_duration(value, field=field, at_most=at_most)
    return value


class Readiness(Strict):
    """A replica is ready once ``GET path`` answers 2xx within ``timeout``; probing starts
    ``initial_delay`` after it starts."""

    path: ReadinessPath = Field(
        description="an absolute URL path, e.g. /health")
    timeout: Duration = Field(default="5s", description="per probe, e.g. 5s")
    initial_delay: Duration = Field(default="0s", description="before the first probe")

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: Duration) -> Duration:
        return _duration(value, "timeout", 300)

    @field_validator("initial_delay")
    @classmethod
    def _delay(cls, value: Duration) -> Duration:
        return _duration(value, "initial_delay", 3600)


class Replicas(Strict):
    """How many replicas run: between ``min`` (0: scale to zero) and ``max``."""

    min: int = Field(default=1, ge=0, le=MAX_REPLICAS, strict=True)
    max: int = Field(default=1, ge=1, le=MAX_REPLICAS, strict=True)
    target_rps: float | None = Field(default=None, gt=0, description=(
        "requests/s one replica should serve; the count follows the traffic in [min, max]"))
    target_p99: Duration | None = Field(default=None, description=(
        "the p99 latency to keep (e.g. 250ms): above it the count grows by p99 / target, "
        "below it shrinks, in [min, max]"))

    @field_validator("target_p99")
    @classmethod
    def _p99(cls, value: Duration | None) -> Duration | None:
        if value is not None and parse_duration(value, field="target_p99", at_most=600) <= 0:
            raise InvalidInput(f"target_p99 {value!r} is no latency to keep",
                               field="target_p99", hint="write e.g. 250ms")
        return value

    @model_validator(mode="after")
    def _ordered(self) -> Replicas:
        if self.max < self.min:
            raise InvalidInput(f"max {self.max} is below min {self.min}", field="max",
                               hint="write max at least min")
        return self


class Rollout(Strict):
    """A new version takes ``steps`` percent of the traffic in turn, ``pause`` apart."""

    steps: list[Percent] = Field(default_factory=lambda: [100], min_length=1, max_length=20)
    pause: Duration = Field(default="1m", description="between steps, e.g. 5m")
    max_error_increase: float = Field(default=5.0, ge=0, le=100, description=(
        "percentage points of errors over the stable version's before rolling back"))
    max_p99_increase: Duration = Field(default="200ms", description=(
        "p99 latency over the stable version's before rolling back, e.g. 200ms"))
    min_requests: int = Field(default=100, ge=1, le=1_000_000, strict=True, description=(
        "requests the new version serves at a step before it is judged"))
    ready_timeout: Duration = Field(default="10m", description=(
        "rolled back when no replica of the new version is ready by then"))

    @field_validator("max_p99_increase")
    @classmethod
    def _p99(cls, value: Duration) -> Duration:
        return _duration(value, "max_p99_increase", 3600)

    @field_validator("ready_timeout")
    @classmethod
    def _ready(cls, value: Duration) -> Duration:
        return _duration(value, "ready_timeout", 86400)

    @field_validator("steps")
    @classmethod
    def _steps(cls, value: list[int]) -> list[int]:
        if any(b <= a for a, b in itertools.pairwise(value)) or value[-1] != 100:
            raise InvalidInput(f"steps {value} must rise and end at 100",
                               hint="e.g. steps: [10, 50, 100]")
        return value

    @field_validator("pause")
    @classmethod
    def _pause(cls, value: Duration) -> Duration:
        return _duration(value, "pause", 86400)


class Service(Strict):
    port: int = Field(ge=1, le=65535, strict=True, description="the port the server binds")
    readiness: Readiness | None = None
    replicas: Replicas = Field(default_factory=Replicas)
    resources: Resources | None = Field(default=None, description=(
        "what each replica needs (default: the task's resources)"))
    rollout: Rollout = Field(default_factory=Rollout)

    @field_validator("readiness", mode="before",
                     json_schema_input_type=Readiness | ReadinessPath | None)
    @classmethod
    def _path_alone(cls, value: Any) -> Any:
        return {"path": value} if isinstance(value, str) else value

    @field_validator("replicas", mode="before", json_schema_input_type=Replicas | StrictInt)
    @classmethod
    def _count_alone(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return {"min": value, "max": max(value, 1)}
        return value
