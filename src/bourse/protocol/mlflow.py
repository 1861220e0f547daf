"""The bodies of the MLflow REST API subset the coordinator serves (``server.routes.mlflow``),
as MLflow's clients send them: protobuf's JSON, so int64 fields may come as strings and
doubles as ``"NaN"``/``"Infinity"``; unknown fields are ignored (newer clients send more)."""

from __future__ import annotations

from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field


class MlflowErrorView(BaseModel):
    """MLflow's error body."""

    error_code: str  # INVALID_PARAMETER_VALUE, RESOURCE_DOES_NOT_EXIST, UNAUTHENTICATED, ...
    message: str

class Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class KeyValue(Body):
    key: str
    value: str = ""


class MetricIn(NamedTuple):
    """A point of a batch (``{"key", "value", "timestamp", "step"}``), validated by pydantic
    straight from the JSON into this tuple, which the server stores as it is: a batch holds up
    to 1,000 points, and a model or a dict per point cost more than storing them
    (benchmarks/tracking.py). Pydantic takes the positional form ``[key, value, timestamp,
    step]`` as well."""

    key: str
    value: float
    timestamp: int = 0
    step: int = 0


class CreateExperiment(Body):
    name: str
    artifact_location: str | None = None
    tags: list[KeyValue] = Field(default_factory=list)


class SearchExperiments(Body):
    max_results: int = Field(1000, ge=1, le=50_000)
    filter: str | None = None
    page_token: str | None = None


class CreateRun(Body):
    experiment_id: str = "0"
    user_id: str = ""
    start_time: int | None = None
    run_name: str | None = None
    tags: list[KeyValue] = Field(default_factory=list)


class UpdateRun(Body):
    run_id: str | None = None
    run_uuid: str | None = None
    status: str | None = None
    end_time: int | None = None
    run_name: str | None = None


class RunRef(Body):
    run_id: str | None = None
    run_uuid: str | None = None


class SearchRuns(Body):
    experiment_ids: list[str] = Field(default_factory=list)
    filter: str | None = None
    run_view_type: str = "ACTIVE_ONLY"
    max_results: int = Field(1000, ge=1, le=50_000)  # MLflow's own bounds
    order_by: list[str] = Field(default_factory=list)
    page_token: str | None = None


class LogBatch(RunRef):
    metrics: list[MetricIn] = Field(default_factory=list)
    params: list[KeyValue] = Field(default_factory=list)
    tags: list[KeyValue] = Field(default_factory=list)


class LogMetric(RunRef):
    key: str
    value: float
    timestamp: int = 0
    step: int = 0


class LogParam(RunRef):
    key: str
    value: str


class SetTag(RunRef):
    key: str
    value: str


class DeleteTag(RunRef):
    key: str
