"""Store claims: what checking a job's data against other projects' claims costs at submit.

Submits jobs into a real database (SQLite by default, or ``--database-url``), one transaction
each, through the same service function the API calls: jobs naming no data (the baseline,
measured in the same run), then jobs naming an input, two outputs and a checkpoint (an app
stage), first with no claims in the table, then with ``--claims`` claims of another project
spread over the bucket. The index answers each look-up (ancestors by equality, descendants by
a key range), so the last two figures should be close. On PostgreSQL the table is analysed
after it is filled, as autovacuum does on a live exchange.

    python benchmarks/claims.py [--jobs 500] [--claims 50000] [--database-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, select, text

from bourse.core.uri import parse_uri
from bourse.protocol.common import JobSpec
from bourse.server.db.database import Database
from bourse.server.db.schema import StoreClaim
from bourse.server.db.upsert import insert_ignore
from bourse.server.services.claims import CLAIMS
from bourse.server.services.jobs import submit_job

ROOT = parse_uri("s3://bourse/")


def stage(i: int) -> JobSpec:
    base = f"s3://bourse/runs/r-mine-{i}/Train/"
    return JobSpec(command=["true"], inputs={"data": "s3://datasets/digits/"},
                   outputs={"model": base + "model/", "eval": base + "eval/"},
                   checkpoint=base + "checkpoints/")


async def submit(db: Database, specs: list[JobSpec]) -> float:
    """Milliseconds per submit."""
    t0 = time.perf_counter()
    for spec in specs:
        async with db.write() as session:
            await submit_job(session, spec, "default", time.time(), ROOT)
    return (time.perf_counter() - t0) * 1000 / len(specs)


async def fill(db: Database, count: int) -> None:
    """``count`` claims of another project, as app runs leave them."""
    rows = [{"scheme": "s3", "bucket": "bourse", "prefix": f"runs/r-theirs-{i}/Train/{p}/",
             "project_id": "theirs", "job_id": f"j-{i}", "created_at": 0.0}
            for i in range(count // 2) for p in ("model", "checkpoints")]
    for start in range(0, len(rows), 5000):
        async with db.write() as session:
            await insert_ignore(session, CLAIMS, rows[start:start + 5000])
    if not db.is_sqlite:  # the statistics autovacuum keeps on a live exchange; without them
        async with db.write() as session:  # the planner takes 50k fresh rows for a few
            await session.execute(text("ANALYZE store_claims"))


async def main(jobs: int, claims: int, url: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(url or f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}")
        await db.migrate()
        try:
            plain = await submit(db, [JobSpec(command=["true"]) for _ in range(jobs)])
            empty = await submit(db, [stage(i) for i in range(jobs)])
            await fill(db, claims)
            async with db.read() as session:
                held = await session.scalar(select(func.count()).select_from(StoreClaim))
            full = await submit(db, [stage(jobs + i) for i in range(jobs)])
        finally:
            await db.close()
    print(f"{db.engine.dialect.name}, {jobs} submits each, one transaction per submit")
    print(f"  no data (baseline):                      {plain:6.2f} ms/submit")
    print(f"  data, no claims held:                    {empty:6.2f} ms/submit "
          f"({empty - plain:+.2f} ms)")
    print(f"  data, {held:,} claims held in all:      {full:6.2f} ms/submit "
          f"({full - plain:+.2f} ms)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--claims", type=int, default=50_000)
    parser.add_argument("--database-url")
    args = parser.parse_args()
    asyncio.run(main(args.jobs, args.claims, args.database_url))
