"""Runs written the way MLflow clients write them (the MLflow REST routes), for the tracking
pages' tests: one call per run, with params, tags and a metric curve."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

API = "/api/2.0/mlflow"
Post = Callable[..., Awaitable[httpx.Response]]


async def mlflow(post: Post, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
    response = await post("POST", f"{API}/{path}", json=dict(body))
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def experiment(post: Post, name: str) -> str:
    made = await mlflow(post, "experiments/create", {"name": name})
    experiment_id: str = made["experiment_id"]
    return experiment_id


async def logged_run(post: Post, experiment_id: str, name: str, params: Mapping[str, str],
                     curves: Mapping[str, list[float]], *,
                     tags: Mapping[str, str] | None = None) -> str:
    made = await mlflow(post, "runs/create", {"experiment_id": experiment_id,
                                              "run_name": name})
    run_id: str = made["run"]["info"]["run_id"]
    points = [{"key": key, "value": value, "timestamp": 1000 + step, "step": step}
              for key, values in curves.items() for step, value in enumerate(values)]
    for start in range(0, max(len(points), 1), 1000):  # MLflow's batch limit
        await mlflow(post, "runs/log-batch", {
            "run_id": run_id, "metrics": points[start:start + 1000],
            "params": [{"key": k, "value": v} for k, v in params.items()] if not start else [],
            "tags": [{"key": k, "value": v} for k, v in (tags or {}).items()] if not start else []})
    return run_id


def sweep_rows(experiment_id: str, runs: int, steps: int, project: str = "default",
               ) -> dict[str, list[tuple[object, ...]]]:
    """The rows of ``runs`` runs as ``services.tracking`` stores them (for tests that need
    more runs than the REST API writes quickly): run ``i`` (``sweep-0000``...) ends at a
    ``val_loss`` of ``1/steps + i/10000``; ``lr`` and ``seed`` differ between runs, ``batch``
    does not."""
    rows: dict[str, list[tuple[object, ...]]] = {
        "tracking_runs": [], "tracking_params": [], "tracking_metrics": [],
        "tracking_latest": []}
    for index in range(runs):
        run_id = f"{experiment_id}s{index:05d}".ljust(32, "0")
        rows["tracking_runs"].append((run_id, project, experiment_id, f"sweep-{index:04d}",
                                      "FINISHED", "active", "", 1_700_000_000_000 + index,
                                      None, None))
        rows["tracking_params"] += [(run_id, "lr", LEARNING_RATES[index % 4]),
                                    (run_id, "batch", "64"), (run_id, "seed", str(index))]
        for key, curve in (("val_loss", [1 / (s + 1) for s in range(steps)]),
                           ("acc", [s / steps for s in range(steps)])):
            values = [v + index / 10_000 for v in curve]
            rows["tracking_metrics"] += [(run_id, key, s, 1000 + s, 0, v)
                                         for s, v in enumerate(values)]
            rows["tracking_latest"].append((run_id, key, values[-1], steps - 1,
                                            1000 + steps - 1, steps))
    return rows


LEARNING_RATES = ("1e-2", "3e-3", "1e-3", "3e-4")
COLUMNS = {
    "tracking_runs": "id, project_id, experiment_id, name, status, lifecycle_stage, user_id, "
                     "start_time, end_time, job_id",
    "tracking_params": "run_id, key, value",
    "tracking_metrics": "run_id, key, step, timestamp, seq, value",
    "tracking_latest": "run_id, key, value, step, timestamp, count",
}


def insert_rows(database: Path, rows: Mapping[str, list[tuple[object, ...]]]) -> None:
    with contextlib.closing(sqlite3.connect(database, timeout=10)) as db, db:
        for table, values in rows.items():
            marks = ", ".join("?" * len(values[0]))
            db.executemany(f"INSERT INTO {table} ({COLUMNS[table]}) VALUES ({marks})",
                           values)
