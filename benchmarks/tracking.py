"""Experiment tracking: metric points ingested through MLflow's log-batch (in process, httpx
ASGI, 1,000 points a batch), against the same points written straight into the database with
one executemany per batch (the baseline, in the same run, rounds alternated); and the chart of
10 runs × 100,000 points downsampled to 1,000 each (``/api/v1/tracking/chart``).

    python benchmarks/tracking.py [--batches 50] [--rounds 5] [--chart-points 100000]

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
from bourse.server.db.schema import TrackingLatest
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


async def through_api(client: httpx.AsyncClient, batches: int) -> float:
    run_id = await _new_run(client)
    bodies = [_batch(run_id, b * BATCH) for b in range(batches)]
    headers = {"Content-Type": "application/json"}
    t0 = time.perf_counter()
    for body in bodies:
        response = await client.post("/api/2.0/mlflow/runs/log-batch", content=body,
                                     headers=headers)
        assert response.status_code == 200, response.text
    return batches * BATCH / (time.perf_counter() - t0)


async def straight(app: Any, batches: int) -> float:
    """The same rows, one executemany on the driver per batch, each its own transaction:
    what storing the points costs, without the request, its parsing, the run's checks, the
    latest values and the chart's buckets."""
    db = app.state.bourse.db
    run_id = uuid.uuid4().hex
    points = [[Point("loss", 1.0 / (s + 1), 1_700_000_000_000 + s, s)
               for s in range(b * BATCH, (b + 1) * BATCH)] for b in range(batches)]
    t0 = time.perf_counter()
    for batch in points:
        async with db.write() as session:
            await insert_points(session, point_rows(run_id, batch))
    return batches * BATCH / (time.perf_counter() - t0)


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


async def chart(client: httpx.AsyncClient, ids: list[str], reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        response = await client.get("/api/v1/tracking/chart", params={
            "run": ids, "key": "loss", "points": 1000})
        times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, response.text
        assert all(len(s["points"]) <= 1000 for s in response.json()["series"])
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
            api, direct = [], []
            for _ in range(args.rounds):
                api.append(await through_api(client, args.batches))
                direct.append(await straight(app, args.batches))
            _row("log-batch points/s", api)
            _row("straight points/s (baseline)", direct)
            _row("ratio api/baseline", [a / d for a, d in zip(api, direct, strict=True)])
            ids = await _fill(app, client, 10, args.chart_points)
            _row(f"chart 10 x {args.chart_points:,} ms", await chart(client, ids, args.rounds))


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
    parser.add_argument("--chart-points", type=int, default=100_000)
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
