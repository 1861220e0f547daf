"""Experiment tracking: metric points ingested through MLflow's log-batch (in process, httpx
ASGI, 1,000 points a batch), against the same points written straight into the database with
one executemany per batch (the baseline, in the same run, rounds alternated); and the chart of
10 runs × 100,000 points downsampled to 1,000 each (``/api/v1/tracking/chart``); and the
server's side of the comparison page of 1,000 runs (``/ui/tracking/compare``, its HTML; the
browser's side is measured by tests/ui/test_browser.py).

    python benchmarks/tracking.py [--batches 50] [--rounds 5] [--clients 4]
                                  [--chart-points 100000] [--compare-runs 1000]

Each figure is also given per CPU-second of this process (``time.process_time``): on a
loaded machine the wall clock counts the time other processes held the cores, the CPU time
does not. ``--clients`` runs log-batch calls from that many clients at once (jobs log
concurrently; the writes group-commit).

On SQLite (a file in a temp dir), and on PostgreSQL too when BOURSE_TEST_PG_URL is set (a
database made for the run and dropped after).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from bourse.server.app import create_app
from bourse.server.config import ServerConfig, StoreConfig
from bourse.server.db.schema import TrackingLatest, TrackingParam, TrackingRun
from bourse.server.services.tracking_charts import add_buckets
from bourse.server.services.tracking_log import Point, insert_points, point_rows

BATCH = 1000


def _batch(run_id: str, start: int) -> bytes:
    return json.dumps({"run_id": run_id, "metrics": [
        {"key": "loss", "value": 1.0 / (s + 1), "timestamp": 1_700_000_000_000 + s, "step": s}
        for s in range(start, start + BATCH)]}).encode()


async def _new_run(client: httpx.AsyncClient) -> str:
    made = await client.post("/api/2.0/mlflow/runs/create", json={"experiment_id": "0"})
    assert made.status_code == 200, made.text
    run_id: str = made.json()["run"]["info"]["run_id"]
    return run_id


Rate = tuple[float, float]  # per wall second, per CPU second


def _rate(count: int, wall: float, cpu: float) -> Rate:
    return count / (time.perf_counter() - wall), count / (time.process_time() - cpu)


async def _post_all(client: httpx.AsyncClient, bodies: list[bytes]) -> None:
    headers = {"Content-Type": "application/json"}
    for body in bodies:
        response = await client.post("/api/2.0/mlflow/runs/log-batch", content=body,
                                     headers=headers)
        assert response.status_code == 200, response.text


async def through_api(client: httpx.AsyncClient, batches: int, clients: int = 1) -> Rate:
    """``batches`` log-batch calls from each of ``clients`` clients at once, one run each."""
    runs = [await _new_run(client) for _ in range(clients)]
    bodies = [[_batch(run_id, b * BATCH) for b in range(batches)] for run_id in runs]
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(_post_all(client, each) for each in bodies))
    return _rate(clients * batches * BATCH, wall, cpu)


async def straight(app: Any, batches: int) -> Rate:
    """The same rows, one executemany on the driver per batch, each its own transaction:
    what storing the points costs, without the request, its parsing, the run's checks, the
    latest values and the chart's buckets."""
    db = app.state.bourse.db
    run_id = uuid.uuid4().hex
    points = [[Point("loss", 1.0 / (s + 1), 1_700_000_000_000 + s, s)
               for s in range(b * BATCH, (b + 1) * BATCH)] for b in range(batches)]
    wall, cpu = time.perf_counter(), time.process_time()
    for batch in points:
        async with db.write() as session:
            await insert_points(session, point_rows(run_id, batch))
    return _rate(batches * BATCH, wall, cpu)


async def _fill(app: Any, client: httpx.AsyncClient, runs: int, points: int) -> list[str]:
    """Runs of ``points`` points each, written straight in (the chart reads them)."""
    ids = [await _new_run(client) for _ in range(runs)]
    db = app.state.bourse.db
    for run_id in ids:
        for start in range(0, points, 20_000):
            batch = [Point("loss", (s % 977) / 977, s, s)
                     for s in range(start, min(points, start + 20_000))]
            async with db.write() as session:
                await insert_points(session, point_rows(run_id, batch))
                await add_buckets(session, run_id, batch)
        async with db.write() as session:
            session.add(TrackingLatest(run_id=run_id, key="loss", value=0.0, step=points - 1,
                                       timestamp=points - 1, count=points))
    return ids


async def chart(client: httpx.AsyncClient, ids: list[str], reps: int) -> list[Rate]:
    """Milliseconds a chart request takes, wall and CPU."""
    times = []
    for _ in range(reps):
        wall, cpu = time.perf_counter(), time.process_time()
        response = await client.get("/api/v1/tracking/chart", params={
            "run": ids, "key": "loss", "points": 1000})
        times.append(((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000))
        assert response.status_code == 200, response.text
        assert all(len(s["points"]) <= 1000 for s in response.json()["series"])
    return times


async def _sweep(app: Any, runs: int) -> str:
    """``runs`` runs of one experiment written straight in: three params (two differ), two
    metrics' latest points; what the comparison page reads."""
    experiment = f"bench{uuid.uuid4().hex[:6]}"
    async with app.state.bourse.db.write() as session:
        for i in range(runs):
            run_id = f"{experiment}{i:05d}".ljust(32, "0")
            session.add(TrackingRun(id=run_id, project_id="default", experiment_id=experiment,
                                    name=f"sweep-{i:04d}", status="FINISHED",
                                    lifecycle_stage="active", user_id="",
                                    start_time=1_700_000_000_000 + i, end_time=None))
            session.add_all([TrackingParam(run_id=run_id, key=k, value=v) for k, v in (
                ("lr", ("1e-2", "1e-3")[i % 2]), ("batch", "64"), ("seed", str(i)))])
            session.add_all([TrackingLatest(run_id=run_id, key=k, value=v + i / 10_000, step=19,
                                            timestamp=1019, count=20)
                             for k, v in (("val_loss", 0.05), ("acc", 0.9))])
    return experiment


async def compare_page(client: httpx.AsyncClient, token: str, experiment: str,
                       reps: int) -> list[Rate]:
    """Milliseconds the comparison page's HTML takes, wall and CPU."""
    login = await client.post("/ui/login", data={"token": token},
                              headers={"Origin": "http://b.test", "Authorization": ""})
    assert login.status_code == 303, login.text
    times = []
    for _ in range(reps):
        wall, cpu = time.perf_counter(), time.process_time()
        response = await client.get("/ui/tracking/compare", params={"experiment": experiment},
                                    headers={"Authorization": ""})
        times.append(((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000))
        assert response.status_code == 200 and "data-run-id" in response.text, response.text
    return times


async def measure(root: Path, database_url: str | None, args: argparse.Namespace) -> None:
    config = ServerConfig(data_dir=root / "data", credentials_path=root / "cred.json",
                          store=StoreConfig.none(), database_url=database_url)
    app = create_app(config, run_scheduler=False)
    async with app.router.lifespan_context(app):
        token = json.loads((root / "cred.json").read_text())["token"]
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://b.test",
                                     headers={"Authorization": f"Bearer {token}"},
                                     timeout=300) as client:
            api, many, direct = [], [], []
            for _ in range(args.rounds):  # alternated, so that a change of load hits all three
                api.append(await through_api(client, args.batches))
                many.append(await through_api(client, args.batches, args.clients))
                direct.append(await straight(app, args.batches))
            _rows("log-batch points/s", api)
            _rows(f"log-batch, {args.clients} clients, points/s", many)
            _rows("straight points/s (baseline)", direct)
            for name, rates in (("ratio log-batch/baseline", api),
                                (f"ratio {args.clients} clients/baseline", many)):
                _rows(name, [(a[0] / d[0], a[1] / d[1]) for a, d in zip(rates, direct,
                                                                          strict=True)])
            ids = await _fill(app, client, 10, args.chart_points)
            _rows(f"chart 10 x {args.chart_points:,} ms", await chart(client, ids, args.rounds))
            experiment = await _sweep(app, args.compare_runs)
            _rows(f"compare page, {args.compare_runs:,} runs, ms", await compare_page(
                client, token, experiment, args.rounds))


def _rows(name: str, values: list[Rate]) -> None:
    _row(name, [wall for wall, _ in values])
    _row("  per CPU second" if "ms" not in name else "  CPU ms", [cpu for _, cpu in values])


def _row(name: str, values: list[float]) -> None:
    print(f"  {name:<34} min {min(values):>10,.2f}  median {statistics.median(values):>10,.2f}"
          f"  max {max(values):>10,.2f}")


async def _pg_database(base: str) -> tuple[str, str]:
    name = f"bench_tracking_{uuid.uuid4().hex[:8]}"
    engine = create_async_engine(base, isolation_level="AUTOCOMMIT")
    async with engine.connect() as connection:
        await connection.execute(text(f'CREATE DATABASE "{name}"'))
    await engine.dispose()
    return name, base.rsplit("/", 1)[0] + f"/{name}"


async def _drop(base: str, name: str) -> None:
    engine = create_async_engine(base, isolation_level="AUTOCOMMIT")
    async with engine.connect() as connection:
        await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    await engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--chart-points", type=int, default=100_000)
    parser.add_argument("--compare-runs", type=int, default=1000)
    args = parser.parse_args()
    print(f"SQLite ({args.batches} batches of {BATCH} points, {args.rounds} rounds):")
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(measure(Path(root), None, args))
    pg = os.environ.get("BOURSE_TEST_PG_URL")
    if pg:
        print("PostgreSQL:")
        name, url = asyncio.run(_pg_database(pg))
        try:
            with tempfile.TemporaryDirectory() as root:
                asyncio.run(measure(Path(root), url, args))
        finally:
            asyncio.run(_drop(pg, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
