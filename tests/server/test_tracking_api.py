"""Experiment tracking over the MLflow REST subset and the JSON read API, in process (httpx
ASGI), on SQLite and PostgreSQL: write-once params, append-only metrics, MLflow-shaped errors
and limits, search, a job's run made on first use, the job token's one run, downsampling."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from server_harness import Exchange

from bourse.server.services.tracking_tokens import mint

pytestmark = pytest.mark.anyio
API = "/api/2.0/mlflow"


async def _post(exchange: Exchange, path: str, body: dict[str, Any], status: int = 200,
                headers: dict[str, str] | None = None) -> dict[str, Any]:
    response = await exchange.client.post(f"{API}/{path}", json=body, headers=headers)
    assert response.status_code == status, response.text
    found: dict[str, Any] = response.json()
    return found


async def _run(exchange: Exchange, **body: Any) -> str:
    made = await _post(exchange, "runs/create", {"experiment_id": "0", **body})
    run_id: str = made["run"]["info"]["run_id"]
    return run_id


async def test_params_are_written_once_and_metrics_appended(exchange: Exchange) -> None:
    run_id = await _run(exchange, run_name="first")
    batch = {"run_id": run_id, "params": [{"key": "lr", "value": "1e-3"}],
             "metrics": [{"key": "loss", "value": 1.0 / (s + 1), "timestamp": 1000 + s,
                          "step": s} for s in range(10)], "tags": [{"key": "t", "value": "a"}]}
    await _post(exchange, "runs/log-batch", batch)
    await _post(exchange, "runs/log-batch", batch)  # sent twice by a retrying client: once
    again = await _post(exchange, "runs/log-parameter",
                        {"run_id": run_id, "key": "lr", "value": "0.1"}, status=400)
    assert again["error_code"] == "INVALID_PARAMETER_VALUE"
    assert "Changing param values is not allowed" in again["message"]
    await _post(exchange, "runs/set-tag", {"run_id": run_id, "key": "t", "value": "b"})
    got = (await exchange.client.get(f"{API}/runs/get", params={"run_id": run_id})).json()
    data = got["run"]["data"]
    assert data["params"] == [{"key": "lr", "value": "1e-3"}]
    assert {"key": "t", "value": "b"} in data["tags"]
    assert data["metrics"] == [{"key": "loss", "value": 0.1, "timestamp": 1009, "step": 9}]
    history = (await exchange.client.get(f"{API}/metrics/get-history", params={
        "run_id": run_id, "metric_key": "loss", "max_results": 4})).json()
    assert [p["step"] for p in history["metrics"]] == [0, 1, 2, 3]
    rest = (await exchange.client.get(f"{API}/metrics/get-history", params={
        "run_id": run_id, "metric_key": "loss", "page_token": history["next_page_token"]}))
    assert [p["step"] for p in rest.json()["metrics"]] == list(range(4, 10))


async def test_limits_and_errors_are_mlflows(exchange: Exchange) -> None:
    run_id = await _run(exchange)
    many = [{"key": "m", "value": 1.0, "timestamp": 1, "step": s} for s in range(1001)]
    refused = await _post(exchange, "runs/log-batch", {"run_id": run_id, "metrics": many},
                          status=400)
    assert refused["error_code"] == "INVALID_PARAMETER_VALUE"
    assert "at most 1000 metrics" in refused["message"]
    missing = await exchange.client.get(f"{API}/runs/get", params={"run_id": "nope"})
    assert missing.status_code == 404
    assert missing.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    anonymous = await exchange.client.get(f"{API}/runs/get", params={"run_id": run_id},
                                          headers={"Authorization": ""})
    assert anonymous.status_code == 401 and anonymous.json()["error_code"] == "UNAUTHENTICATED"
    bad = await _post(exchange, "runs/search", {"filter": "metrics.loss < 'x'"}, status=400)
    assert "compares with a number" in bad["message"]
    big = await exchange.client.post(f"{API}/runs/log-batch", content=b"{" + b" " * 1_100_000
                                     + b"}", headers={"Content-Type": "application/json"})
    assert big.status_code == 400 and "1 MB" in big.json()["message"]


@pytest.mark.parametrize("body", [b"", b"{", b'{"metrics": 5}', b"{" + b" " * 1_100_000 + b"}",
                                  b'{"name": "a\\u0000b"}'])
async def test_who_asks_is_checked_before_what_is_asked(exchange: Exchange, body: bytes) -> None:
    """An unauthenticated request is 401 whatever its body: a validation error before the
    token is checked would let anyone probe the API's shapes."""
    for path in ("experiments/create", "runs/log-batch", "runs/search"):
        for token in ("", "Bearer bse_u_wrong"):
            response = await exchange.client.post(
                f"{API}/{path}", content=body, headers={"Authorization": token,
                                                        "Content-Type": "application/json"})
            assert response.status_code == 401, (path, token, response.text)
            assert response.json()["error_code"] == "UNAUTHENTICATED"
    query = await exchange.client.get(f"{API}/runs/get?run_id=a%00b",
                                      headers={"Authorization": ""})
    assert query.status_code == 401


async def test_search_filters_orders_and_pages(exchange: Exchange) -> None:
    for index, lr in enumerate(["1e-3", "1e-2", "1e-1"]):
        run_id = await _run(exchange, run_name=f"r{index}")
        await _post(exchange, "runs/log-batch", {"run_id": run_id, "params": [
            {"key": "lr", "value": lr}], "metrics": [
            {"key": "val_loss", "value": 0.1 * (index + 1), "timestamp": 5, "step": 1}]})
    found = await _post(exchange, "runs/search", {
        "experiment_ids": ["0"], "filter": 'metrics.val_loss < 0.25 and params.lr != "1e-3"'})
    assert [r["info"]["run_name"] for r in found["runs"]] == ["r1"]
    ordered = await _post(exchange, "runs/search", {
        "experiment_ids": ["0"], "order_by": ["metrics.val_loss DESC"], "max_results": 2})
    assert [r["info"]["run_name"] for r in ordered["runs"]] == ["r2", "r1"]
    rest = await _post(exchange, "runs/search", {
        "experiment_ids": ["0"], "order_by": ["metrics.val_loss DESC"],
        "page_token": ordered["next_page_token"]})
    assert [r["info"]["run_name"] for r in rest["runs"]] == ["r0"]
    listed = (await exchange.client.get("/api/v1/tracking/runs", params={
        "filter": "attributes.run_name LIKE 'r%'", "order_by": "params.lr ASC"})).json()
    assert [r["name"] for r in listed["runs"]] == ["r2", "r1", "r0"]  # params are strings


async def test_a_jobs_run_is_the_job_and_its_token_writes_only_it(exchange: Exchange) -> None:
    job = await exchange.submit(name="train")
    other = await exchange.submit(name="other")
    token = {"Authorization": f"Bearer {mint(exchange.state.key, job['id'])}"}
    got = await exchange.client.get(f"{API}/runs/get", params={"run_id": job["id"]},
                                    headers=token)
    assert got.status_code == 200, got.text
    assert got.json()["run"]["info"]["run_name"] == "train"
    made = await _post(exchange, "runs/create", {"experiment_id": "0"}, headers=token)
    assert made["run"]["info"]["run_id"] == job["id"]  # a job's writers share its run
    await _post(exchange, "runs/log-metric", {"run_id": job["id"], "key": "x", "value": 1,
                                              "step": 3}, headers=token)
    foreign = await _post(exchange, "runs/log-metric", {
        "run_id": other["id"], "key": "x", "value": 1}, status=403, headers=token)
    assert foreign["error_code"] == "PERMISSION_DENIED"
    forged = {"Authorization": f"Bearer {mint(b'another key' * 3, job['id'])}"}
    assert (await exchange.client.get(f"{API}/runs/get", params={"run_id": job["id"]},
                                      headers=forged)).status_code == 401
    user_api = await exchange.client.get("/api/v1/jobs", headers=token)
    assert user_api.status_code == 401  # the tracking token is for tracking only
    detail = (await exchange.client.get(f"/api/v1/tracking/runs/{job['id']}")).json()
    assert detail["job_id"] == job["id"] and detail["metrics"]["x"]["step"] == 3
    assert detail["job_state"] == "PENDING" and detail["attempts"] == []
    system = await exchange.client.get(f"/api/v1/tracking/runs/{job['id']}/system")
    assert system.status_code == 200 and system.json()["job_id"] == job["id"]


async def test_a_long_curve_is_downsampled(exchange: Exchange) -> None:
    run_id = await _run(exchange)
    for start in range(0, 5000, 1000):
        await _post(exchange, "runs/log-batch", {"run_id": run_id, "metrics": [
            {"key": "loss", "value": float(s % 997), "timestamp": s, "step": s}
            for s in range(start, start + 1000)]})
    chart = (await exchange.client.get("/api/v1/tracking/chart", params={
        "run": run_id, "key": "loss", "points": 100})).json()  # from the buckets
    series = chart["series"][0]
    assert series["total"] == 5000 and 50 <= len(series["points"]) <= 100
    assert series["points"][0] == [0.0, 0.0] and series["points"][-1][0] == 4999.0
    assert max(v for _, v in series["points"]) == 996.0  # the peaks survive
    whole = (await exchange.client.get(f"/api/v1/tracking/runs/{run_id}/metrics/loss",
                                       params={"points": 2000})).json()  # read whole
    assert len(whole["points"]) == 2000 and whole["points"][0] == [0.0, 0.0]


async def test_a_key_with_slashes_is_read_by_its_path(exchange: Exchange) -> None:
    run_id = await _run(exchange)
    await _post(exchange, "runs/log-batch", {"run_id": run_id, "metrics": [
        {"key": "train/loss", "value": 1.0 / (s + 1), "timestamp": s, "step": s}
        for s in range(10)]})

    curve = await exchange.client.get(f"/api/v1/tracking/runs/{run_id}/metrics/train/loss")

    assert curve.status_code == 200, curve.text
    assert curve.json()["key"] == "train/loss" and len(curve.json()["points"]) == 10


async def test_a_falling_curve_is_drawn_falling_when_downsampled(exchange: Exchange) -> None:
    run_id = await _run(exchange)
    for start in range(0, 5000, 1000):
        await _post(exchange, "runs/log-batch", {"run_id": run_id, "metrics": [
            {"key": "loss", "value": 1.0 / (s + 1), "timestamp": s, "step": s}
            for s in range(start, start + 1000)]})

    chart = (await exchange.client.get("/api/v1/tracking/chart", params={
        "run": run_id, "key": "loss", "points": 100})).json()  # from the buckets

    values = [v for _, v in chart["series"][0]["points"]]
    assert len(values) > 10 and values[0] == 1.0
    assert all(a >= b for a, b in itertools.pairwise(values)), values


async def test_a_nul_character_is_refused_with_mlflows_error(exchange: Exchange) -> None:
    run_id = await _run(exchange)

    body = await exchange.client.post(f"{API}/runs/log-parameter", json={
        "run_id": run_id, "key": "lr\u0000", "value": "1"})
    query = await exchange.client.get(f"{API}/experiments/get-by-name",
                                      params={"experiment_name": "a\u0000b"})

    for answer in (body, query):
        assert answer.status_code == 400, answer.text
        assert answer.json()["error_code"] == "INVALID_PARAMETER_VALUE"
        assert "NUL" in answer.json()["message"]


async def test_each_keys_latest_point_keeps_the_newest_step_and_counts_every_point(
        exchange: Exchange) -> None:
    run_id = await _run(exchange)
    points = [{"key": "loss", "value": 0.9, "timestamp": 5, "step": 9},
              {"key": "acc", "value": "NaN", "step": 2},  # protobuf JSON's NaN
              {"key": "loss", "value": 0.5, "timestamp": 6, "step": 9}]  # the last of equals
    await _post(exchange, "runs/log-batch", {"run_id": run_id, "metrics": points})
    older = [["loss", 0.1, 1, 3], {"key": "acc", "value": 0.7, "timestamp": 1, "step": 3}]
    await _post(exchange, "runs/log-batch", {"run_id": run_id, "metrics": older})
    view = (await exchange.client.get(f"/api/v1/tracking/runs/{run_id}")).json()
    assert {k: (m["value"], m["step"], m["count"]) for k, m in view["metrics"].items()} == {
        "loss": (0.5, 9, 3), "acc": (0.7, 3, 2)}


async def test_logging_calls_are_audited_only_when_refused(exchange: Exchange) -> None:
    run_id = await _run(exchange)
    await _post(exchange, "runs/log-batch", {"run_id": run_id, "metrics": [
        {"key": "m", "value": 1.0}], "params": [{"key": "p", "value": "1"}]})
    await _post(exchange, "runs/log-metric", {"run_id": run_id, "key": "m", "value": 2.0})
    await _post(exchange, "runs/log-batch", {"run_id": "no-such-run"}, status=404)
    await _post(exchange, "runs/update", {"run_id": run_id, "status": "FINISHED"})
    records = (await exchange.client.get("/api/v1/audit", params={"limit": 10000})).json()
    found = {(r["action"], r["outcome"]) for r in records["records"]}
    assert {(f"POST {API}/runs/log-batch", "404"), (f"POST {API}/runs/update", "200"),
            (f"POST {API}/runs/create", "200")} <= found
    assert not {a for a in found if a[0].endswith(("log-batch", "log-metric")) and a[1] == "200"}
