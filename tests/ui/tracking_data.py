"""Runs written the way MLflow clients write them (the MLflow REST routes), for the tracking
pages' tests: one call per run, with params, tags and a metric curve."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
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
