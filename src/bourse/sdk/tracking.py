"""The I/O-free calls of experiment tracking's read API (``/api/v1/tracking``): experiments,
runs searched with MLflow's syntax, a run with its params, metrics and cost, and curves
downsampled on the server."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from bourse.protocol.tracking import (
    ChartView,
    ExperimentList,
    ExperimentView,
    RunList,
    SeriesView,
    TrackedRunDetail,
)
from bourse.sdk.core import Call, model

MAX_POINTS = 10_000  # the most points the server returns for one curve


def _quoted(value: str) -> str:
    return quote(value, safe="")


def experiments() -> Call[list[ExperimentView]]:
    return Call("GET", "/tracking/experiments", lambda r: model(ExperimentList)(r).experiments)


def search_runs(experiment_ids: Sequence[str] = (), filter_text: str | None = None,
                order_by: Sequence[str] = (), limit: int = 100, offset: int = 0) -> Call[RunList]:
    params: dict[str, str | int | list[str]] = {"limit": limit, "offset": offset}
    if experiment_ids:
        params["experiment_id"] = list(experiment_ids)
    if filter_text:
        params["filter"] = filter_text
    if order_by:
        params["order_by"] = list(order_by)
    return Call("GET", "/tracking/runs", model(RunList), params=params)


def tracked_run(run_id: str) -> Call[TrackedRunDetail]:
    return Call("GET", f"/tracking/runs/{_quoted(run_id)}", model(TrackedRunDetail))


def metric(run_id: str, key: str, points: int = 1000) -> Call[SeriesView]:
    """Through ``/chart``, whose keys are query parameters: a key may hold a ``/``
    (``train/loss``), which a path segment cannot."""
    return Call("GET", "/tracking/chart", lambda r: model(ChartView)(r).series[0],
                params={"run": [run_id], "key": [key], "points": points})


def chart(run_ids: Sequence[str], keys: Sequence[str], points: int = 1000) -> Call[ChartView]:
    return Call("GET", "/tracking/chart", model(ChartView),
                params={"run": list(run_ids), "key": list(keys), "points": points})
