"""App runs over the API: jobs carry ``run``/``app``/``stage``; ``/api/v1/jobs?run=`` filters
on it, ``/api/v1/runs`` sums runs up; secret env values never leave the coordinator."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from server_harness import Exchange, Live, job_spec, open_exchange, place_job

from bourse.protocol.api import JobView
from bourse.protocol.common import REDACTED, JobSpec
from bourse.server.dataplane import DataPlane
from bourse.server.drivers import DriverWatch
from bourse.server.services.runs import summarise
from bourse.storage import MemoryIssuer, MemoryStore, StoreSettings

pytestmark = pytest.mark.anyio


async def submit_run(exchange: Exchange, run: str, stages: list[str | None]) -> list[str]:
    ids = []
    for stage in stages:
        job = await exchange.submit(name=f"{run}/{stage or 'driver'}", run=run, app="app.py",
                                    stage=stage)
        ids.append(job["id"])
        exchange.clock.advance(1)
    return ids


async def test_jobs_filter_by_run_and_runs_list_newest_first(exchange: Exchange) -> None:
    first = await submit_run(exchange, "r-1", ["Prepare", "Train"])
    await exchange.submit()  # not part of any run
    second = await submit_run(exchange, "r-2", [None, "Prepare"])

    listed = (await exchange.client.get("/api/v1/jobs", params={"run": "r-1"})).json()
    assert [j["id"] for j in listed["jobs"]] == first[::-1]
    runs = (await exchange.client.get("/api/v1/runs")).json()["runs"]
    assert [(r["id"], r["app"], r["stages"], r["driver"], r["state"]) for r in runs] == [
        ("r-2", "app.py", 1, second[0], "PENDING"), ("r-1", "app.py", 2, None, "RUNNING")]
    shown = (await exchange.client.get("/api/v1/runs/r-1")).json()
    assert [(j["id"], j["spec"]["stage"]) for j in shown["jobs"]] == [
        (first[0], "Prepare"), (first[1], "Train")]
    missing = await exchange.client.get("/api/v1/runs/r-none")
    assert missing.status_code == 404 and "bourse runs" in missing.text
    bad = await exchange.client.get("/api/v1/jobs", params={"run": "no spaces"})
    assert bad.status_code == 422


@pytest.fixture
async def stored(database_url: str, tmp_path: Path) -> AsyncIterator[Exchange]:
    """An exchange with an (in-memory) object store, so that jobs may name data."""
    plane = DataPlane(StoreSettings(endpoint="http://store.test:8333"), "bourse",
                      MemoryIssuer(), store=MemoryStore("bourse"))
    async with open_exchange(tmp_path, database_url, dataplane=plane) as opened:
        yield opened


async def test_a_run_shows_its_stages_dependencies_by_data(stored: Exchange) -> None:
    """A fan-out and fan-in: ``prepare`` feeds two trainings, both read by ``compare``; the
    first ``train`` job failed and was retried; ``notes`` reads a dataset from outside."""
    out = "s3://bourse/runs/r-g/{}/{}/"

    async def stage(name: str, inputs: dict[str, str], outputs: list[str]) -> None:
        await stored.submit(name=f"r-g/{name}", run="r-g", app="app.py", stage=name,
                              inputs=inputs, outputs={o: out.format(name, o) for o in outputs})
        stored.clock.advance(1)

    await stored.submit(name="r-g/driver", run="r-g", app="app.py")  # the flow's driver
    await stage("prepare", {}, ["data"])
    await stage("train", {"data": out.format("prepare", "data")}, ["model"])
    await stage("train", {"data": out.format("prepare", "data")}, ["model"])  # its retry
    await stage("baseline", {"data": out.format("prepare", "data") + "train.csv"}, ["model"])
    await stage("notes", {"corpus": "s3://datasets/notes/"}, [])
    await stage("compare", {"ours": out.format("train", "model"),
                            "theirs": out.format("baseline", "model") + "best.ckpt"}, [])

    shown = (await stored.client.get("/api/v1/runs/r-g")).json()
    assert shown["edges"] == [
        {"source": "prepare", "target": "train", "inputs": ["data"]},
        {"source": "prepare", "target": "baseline", "inputs": ["data"]},
        {"source": "train", "target": "compare", "inputs": ["ours"]},
        {"source": "baseline", "target": "compare", "inputs": ["theirs"]},
    ]
    schema = (await stored.client.get("/openapi.json")).json()["components"]["schemas"]
    assert schema["RunEdge"]["required"] == ["source", "target", "inputs"]
    assert "edges" not in schema["RunDetail"].get("required", [])  # older clients are unaffected
    listed = (await stored.client.get("/api/v1/runs")).json()
    assert "edges" not in listed["runs"][0]  # the list stays a summary


async def test_secret_env_values_are_redacted_in_every_view(exchange: Exchange) -> None:
    job = await exchange.submit(env={"BOURSE_TOKEN": "u-secret", "SEED": "1"},
                                secrets=["BOURSE_TOKEN"])

    for view in (job, await exchange.job(job["id"]),
                 (await exchange.client.get("/api/v1/jobs")).json()["jobs"][0]):
        assert view["spec"]["env"] == {"BOURSE_TOKEN": REDACTED, "SEED": "1"}
    refused = await exchange.client.post("/api/v1/jobs", json={
        "command": ["true"], "env": {}, "secrets": ["BOURSE_TOKEN"]})
    assert refused.status_code == 422 and "not in env" in refused.text


def view(stage: str | None, state: str, at: float, cost: float | None = None) -> JobView:
    return JobView(id=f"j-{at:g}", state=state, created_at=at, updated_at=at + 5, attempt=1,
                   cost=cost, spec=JobSpec(command=["x"], run="r", app="a.py", stage=stage))


@pytest.mark.parametrize(("jobs", "state", "ended", "cost"), [
    ([view("A", "SUCCEEDED", 0, 0.5), view("B", "RUNNING", 1)], "RUNNING", None, 0.5),
    ([view("A", "SUCCEEDED", 0, 0.5), view("B", "FAILED", 1, 0.25)], "FAILED", 6, 0.75),
    ([view("A", "FAILED", 0), view("A", "SUCCEEDED", 1)], "SUCCEEDED", 6, None),  # a retry
    ([view(None, "FAILED", 0), view("A", "SUCCEEDED", 1)], "FAILED", 6, None),  # the driver's
])
def test_a_run_sums_up_its_jobs(jobs: list[JobView], state: str, ended: float | None,
                                cost: float | None) -> None:
    run = summarise("r", jobs)

    assert (run.state, run.ended_at, run.cost, run.started_at) == (state, ended, cost, 0)


async def expire(exchange: Exchange, now: float) -> list[str]:
    return await DriverWatch(exchange.state).run_once(now)


async def test_a_run_whose_driver_went_silent_is_cancelled_with_its_jobs(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    exchange, agent = live.exchange, await agent_factory()
    taken = await exchange.client.post("/api/v1/runs/r-1/lease")
    assert taken.status_code == 200, taken.text
    window = exchange.config.driver_lease  # the loss window, as for nodes
    assert taken.json() == {"run": "r-1", "lease_until": exchange.clock() + window,
                            "renew_every_s": window / 3}
    running, attempt = await place_job(exchange, agent, run="r-1", stage="Prepare")
    await agent.event(running, attempt, "started", pid=5)
    waiting = (await exchange.submit(run="r-1", stage="Train", compute={"gpu": "h100"}))["id"]
    other = (await exchange.submit(run="r-2", stage="Train", compute={"gpu": "h100"}))["id"]
    renewed_at = exchange.clock.advance(window - 1)
    assert (await exchange.client.post("/api/v1/runs/r-1/lease")).status_code == 200

    assert await expire(exchange, renewed_at + window - 0.001) == []  # renewed in time
    assert await expire(exchange, renewed_at + window + 0.001) == ["r-1"]

    cancel = await agent.expect("cancel_job", job_id=running)
    assert "its app run was cancelled: its driver (bourse run) stopped renewing" in (
        cancel["reason"])
    parked = await exchange.job(waiting)
    assert (parked["state"], parked["reason"]) == ("CANCELLED", (
        "its app run was cancelled: its driver (bourse run) stopped renewing the run's lease, "
        "which lapsed at " + time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                           time.gmtime(renewed_at + window))))
    assert (await exchange.job(other))["state"] == "PENDING"  # another run is left alone
    run = (await exchange.client.get("/api/v1/runs/r-1")).json()
    assert run["state"] == "CANCELLED" and "stopped renewing" in run["cancelled"]
    assert await expire(exchange, renewed_at + 10 * window) == []  # once
    late = await exchange.client.post("/api/v1/runs/r-1/lease")
    assert late.status_code == 409 and "run r-1 was cancelled" in late.json()["error"]
    refused = await exchange.client.post("/api/v1/jobs", json=job_spec(run="r-1", stage="Eval"))
    assert refused.status_code == 409 and "run r-1 was cancelled" in refused.json()["error"]


async def test_a_driver_that_stops_cancels_its_run_at_once(exchange: Exchange) -> None:
    await exchange.client.post("/api/v1/runs/r-1/lease")
    stage = (await exchange.submit(run="r-1", stage="Train", compute={"gpu": "h100"}))["id"]

    stopped = await exchange.client.post(
        "/api/v1/runs/r-1/cancel", json={"reason": "its driver got SIGHUP"})

    assert stopped.status_code == 200, stopped.text
    assert stopped.json() == {"run": "r-1", "reason": "its driver got SIGHUP", "jobs": [stage]}
    job = await exchange.job(stage)
    assert (job["state"], job["reason"]) == (
        "CANCELLED", "its app run was cancelled: its driver got SIGHUP")
    runs = (await exchange.client.get("/api/v1/runs")).json()["runs"]
    assert [(r["id"], r["state"], r["cancelled"]) for r in runs] == [
        ("r-1", "CANCELLED", "its driver got SIGHUP")]
    assert await expire(exchange, exchange.clock() + 3600) == []  # its lease ended with it


async def test_a_driver_that_ends_releases_its_lease_and_cancels_nothing(
        exchange: Exchange) -> None:
    await exchange.client.post("/api/v1/runs/r-1/lease")
    left = (await exchange.submit(run="r-1", stage="Train"))["id"]  # submitted, never waited

    ended = await exchange.client.delete("/api/v1/runs/r-1/lease")

    assert ended.status_code == 204, ended.text
    assert await expire(exchange, exchange.clock() + 3600) == []
    assert (await exchange.job(left))["state"] == "PENDING"
    assert (await exchange.client.post("/api/v1/runs/r-1/lease")).status_code == 409


async def test_a_run_without_a_lease_never_expires_but_can_be_stopped(
        exchange: Exchange) -> None:
    """An older client never renews: nothing expires its run; `bourse runs stop` still
    cancels it."""
    stage = (await exchange.submit(run="r-old", stage="Train"))["id"]
    assert await expire(exchange, exchange.clock() + 10**6) == []
    assert (await exchange.job(stage))["state"] == "PENDING"
    stopped = await exchange.client.post("/api/v1/runs/r-old/cancel")
    assert stopped.json()["reason"] == "cancelled by its owner"
    assert (await exchange.job(stage))["state"] == "CANCELLED"
    missing = await exchange.client.post("/api/v1/runs/r-none/cancel")
    assert missing.status_code == 404


async def test_another_projects_run_is_not_theirs_to_stop(exchange: Exchange) -> None:
    await exchange.client.post("/api/v1/runs/r-1/lease")
    stage = (await exchange.submit(run="r-1", stage="Train"))["id"]
    token = await exchange.project_token("other")
    theirs = {"Authorization": f"Bearer {token}"}

    stopped = await exchange.client.post("/api/v1/runs/r-1/cancel", headers=theirs)
    taken = await exchange.client.post("/api/v1/runs/r-1/lease", headers=theirs)
    ended = await exchange.client.delete("/api/v1/runs/r-1/lease", headers=theirs)

    assert (stopped.status_code, taken.status_code, ended.status_code) == (404, 404, 404)
    assert (await exchange.job(stage))["state"] == "PENDING"
    assert await expire(exchange, exchange.clock() + 3600) == ["r-1"]  # the owner's lease
