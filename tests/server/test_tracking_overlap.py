"""A job's run across its moves: one point per (key, step). An attempt stopped by a notice
logs a step past the checkpoint it saved, and the attempt that resumes from that checkpoint
logs the step again (what the burst story once stored twice): the later attempt's point stands,
through the MLflow API with the job's token, a user's token after the job ended (a local run
after ``bourse burst --local``) and a spooled record of a stale attempt; the run's count,
latest point and chart buckets follow. The pure core is a table."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from server_harness import Exchange

from bourse.core.states import JobState
from bourse.protocol.mlflow import MetricIn as Point
from bourse.protocol.track import TrackBatch
from bourse.server.db.schema import Attempt, Job
from bourse.server.services.tracking_intake import record_tracks
from bourse.server.services.tracking_overlap import Overlap, overlap, writer_attempt
from bourse.server.services.tracking_tokens import mint

pytestmark = pytest.mark.anyio
API = "/api/2.0/mlflow"
KEY = "train_loss"


def _points(*steps: int, value: float = 1.0) -> list[Point]:
    return [Point(KEY, value, 1000 + s, s) for s in steps]


@pytest.mark.parametrize(("attempt", "stored", "kept", "replaced", "removed"), [
    (2, [], [5, 6], set(), {}),                              # new steps: as they come
    (2, [(KEY, 5, 2)], [5, 6], set(), {}),                   # its own point again: MLflow's
    (2, [(KEY, 5, 1), (KEY, 5, 1)], [5, 6], {(KEY, 5)}, {KEY: 2}),  # past a checkpoint
    (1, [(KEY, 5, 2)], [6], set(), {}),                      # a stale attempt, late
    (3, [("val", 5, 1)], [5, 6], set(), {}),                 # another key at that step
])
def test_a_later_attempt_replaces_an_earlier_ones_points_at_a_step(
        attempt: int, stored: list[tuple[str, int, int]], kept: list[int],
        replaced: set[tuple[str, int]], removed: dict[str, int]) -> None:
    found = overlap(_points(5, 6), attempt, stored)
    assert [p.step for p in found.kept] == kept
    assert found.replaced == replaced and found.removed == Counter(removed)


def test_overlap_defaults_keep_the_batch() -> None:
    points = _points(1)
    assert overlap(points, 1, []) == Overlap(points)


@pytest.mark.parametrize(("state", "attempt"), [
    (JobState.RUNNING, 2), (JobState.PENDING, 2), (JobState.CANCELLED, 3),
    (JobState.SUCCEEDED, 3)])
def test_a_write_after_the_job_ended_stands_for_the_attempt_after_its_last(
        state: JobState, attempt: int) -> None:
    assert writer_attempt(2, state) == attempt


async def _job_at(exchange: Exchange, job_id: str, attempt: int, state: JobState) -> None:
    """The job as the coordinator has it while an attempt runs, or once it ended."""
    async with exchange.state.db.write() as session:
        job = await session.get(Job, job_id)
        assert job is not None
        job.attempt, job.state = attempt, state.value


async def _log(exchange: Exchange, run_id: str, steps: range, value: float, *, at: int,
               token: str | None = None) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    response = await exchange.client.post(f"{API}/runs/log-batch", headers=headers, json={
        "run_id": run_id, "metrics": [{"key": KEY, "value": value + s / 1000,
                                       "timestamp": at + s, "step": s} for s in steps]})
    assert response.status_code == 200, response.text


async def _history(exchange: Exchange, run_id: str) -> list[tuple[int, float]]:
    got = await exchange.client.get(f"{API}/metrics/get-history",
                                    params={"run_id": run_id, "metric_key": KEY})
    assert got.status_code == 200, got.text
    return [(m["step"], m["value"]) for m in got.json()["metrics"]]


async def _get(exchange: Exchange, path: str, **params: Any) -> Any:
    got = await exchange.client.get(path, params=params)
    assert got.status_code == 200, got.text
    return got.json()


async def test_a_moved_job_keeps_one_point_per_step_the_resumed_attempts(
        exchange: Exchange) -> None:
    job_id = (await exchange.submit(name="moved"))["id"]
    token = mint(exchange.state.key, job_id)
    await _job_at(exchange, job_id, 1, JobState.RUNNING)
    await _log(exchange, job_id, range(0, 20), 1.0, at=10_000, token=token)
    # saved at step 20, then one more step before its exit: a spike it never kept
    await _log(exchange, job_id, range(20, 21), 100.0, at=10_000, token=token)
    await _job_at(exchange, job_id, 2, JobState.RUNNING)  # the gang, from step 20
    # its clock behind the first node's: the replaced point was the newer one
    await _log(exchange, job_id, range(20, 30), 2.0, at=5_000, token=token)
    await _log(exchange, job_id, range(30, 31), 200.0, at=5_000, token=token)  # past its save
    await _job_at(exchange, job_id, 2, JobState.CANCELLED)  # handed to a local run
    await _log(exchange, job_id, range(30, 40), 3.0, at=20_000)  # a user's token, from 30
    async with exchange.state.db.write() as session:  # attempt 1's spool, drained late
        session.add(Attempt(job_id=job_id, number=1, rank=0, node_id="n-1", state="PREEMPTED",
                            placed_at=0.0, start_deadline=0.0, resources={}))
        await session.flush()
        late = TrackBatch(job_id=job_id, attempt=1, seq=0, time=0.0,
                          metrics=[(KEY, 9.0, 25, 1025), (KEY, 9.0, 45, 1045)])
        assert await record_tracks(session, "n-1", [late], exchange.clock()) == 1

    history = await _history(exchange, job_id)
    assert [s for s, _ in history] == [*range(40), 45]  # each step once
    values = dict(history)  # attempt 1 to 19, the gang from 20, the local run from 30
    assert [values[s] for s in (19, 20, 25, 29, 30, 39, 45)] == pytest.approx(
        [1.019, 2.02, 2.025, 2.029, 3.03, 3.039, 9.0])
    run = await _get(exchange, f"/api/v1/tracking/runs/{job_id}")
    assert run["metrics"][KEY]["count"] == 41 and run["metrics"][KEY]["step"] == 45
    whole = await _get(exchange, f"/api/v1/tracking/runs/{job_id}/metrics/{KEY}",
                       points=1000)
    assert [int(s) for s, _ in whole["points"]] == [*range(40), 45]
    drawn = await _get(exchange, f"/api/v1/tracking/runs/{job_id}/metrics/{KEY}", points=4)
    assert drawn["total"] == 41  # past 4 × 4 points: read from the buckets
    assert max(v for _, v in drawn["points"]) == 9.0  # neither spike is left in them


async def test_the_latest_point_is_the_replacing_one(exchange: Exchange) -> None:
    job_id = (await exchange.submit(name="latest"))["id"]
    token = mint(exchange.state.key, job_id)
    await _job_at(exchange, job_id, 1, JobState.RUNNING)
    await _log(exchange, job_id, range(0, 3), 1.0, at=10_000, token=token)
    await _job_at(exchange, job_id, 2, JobState.RUNNING)
    await _log(exchange, job_id, range(2, 3), 2.0, at=1_000, token=token)  # an earlier clock
    run = await _get(exchange, f"/api/v1/tracking/runs/{job_id}")
    assert run["metrics"][KEY] == {"value": 2.002, "step": 2, "timestamp": 1_002, "count": 3}
    got = await exchange.client.get(f"{API}/runs/get", params={"run_id": job_id})
    assert got.json()["run"]["data"]["metrics"] == [
        {"key": KEY, "value": 2.002, "timestamp": 1_002, "step": 2}]


async def test_a_run_that_is_no_jobs_keeps_every_point_of_a_step(exchange: Exchange) -> None:
    made = await exchange.client.post(f"{API}/runs/create", json={"experiment_id": "0"})
    run_id = made.json()["run"]["info"]["run_id"]
    await _log(exchange, run_id, range(0, 3), 1.0, at=1_000)
    await _log(exchange, run_id, range(2, 3), 2.0, at=2_000)  # MLflow: both are kept
    assert [s for s, _ in await _history(exchange, run_id)] == [0, 1, 2, 2]


async def test_a_batch_of_several_keys_replaces_each_keys_steps(exchange: Exchange) -> None:
    job_id = (await exchange.submit(name="keys"))["id"]
    token = {"Authorization": f"Bearer {mint(exchange.state.key, job_id)}"}

    async def log(value: float, steps: range) -> None:
        response = await exchange.client.post(f"{API}/runs/log-batch", headers=token, json={
            "run_id": job_id, "metrics": [{"key": key, "value": value, "timestamp": 1, "step": s}
                                          for key in ("a", "b") for s in steps]})
        assert response.status_code == 200, response.text

    await _job_at(exchange, job_id, 1, JobState.RUNNING)
    await log(1.0, range(0, 4))
    await _job_at(exchange, job_id, 2, JobState.RUNNING)
    await log(2.0, range(3, 5))
    for key in ("a", "b"):
        got = await exchange.client.get(f"{API}/metrics/get-history",
                                        params={"run_id": job_id, "metric_key": key})
        assert [(m["step"], m["value"]) for m in got.json()["metrics"]] == [
            (0, 1.0), (1, 1.0), (2, 1.0), (3, 2.0), (4, 2.0)]
