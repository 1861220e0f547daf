"""A queue headed by jobs that cannot run: does placement still reach the jobs behind them?

A real SQLite database, the placement service the scheduler calls: one CPU node with 8 free
CPUs, one 8-GPU node busy with an 8-GPU job, then ``--blocked`` more 8-GPU jobs (they can only
wait) submitted *before* 20 one-CPU jobs. The baseline, measured in the same run, is the same
20 jobs with nothing ahead of them. Printed: how many of the 20 the first pass placed, how many
passes placed all 20 (the old scheduler looked only at the 200 oldest pending jobs and never
reached them), and each pass's time — the quick pass a submit causes and the full pass of the
periodic tick, which also writes every waiting job's reason (the first time; the next one
finds them standing).

    python benchmarks/backlog.py [--blocked 210 2000 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, select

from bourse.core.compute import Compute
from bourse.protocol.common import Capabilities, GpuInfo, JobSpec
from bourse.server.db.database import Database, sqlite_url
from bourse.server.db.schema import Job, Node
from bourse.server.services import projects
from bourse.server.services.jobs import submit_job
from bourse.server.services.placement import place_pending

SMALL = 20
A100 = GpuInfo(model="a100-80gb", name="NVIDIA A100-SXM4-80GB", memory_mib=81920)


def node(node_id: str, cpus: int, gpus: int, now: float) -> Node:
    caps = Capabilities(hostname=node_id, cpus=cpus, memory_gib=512.0, disk_free_gib=100.0,
                        gpus=[A100.model_copy(update={"uuid": f"GPU-{node_id}-{i}"})
                              for i in range(gpus)],
                        driver="550.54.15" if gpus else None, os="Linux")
    return Node(id=node_id, name=node_id, state="online",
                capabilities=caps.model_dump(mode="json"), keep_alive_s=20.0, last_seen=now,
                session="s-1", price=None, created_at=now, updated_at=now,
                verification_status="pass", verified_at=now, project_id="default", tags=[])


async def submit(db: Database, spec: JobSpec, count: int, now: float) -> float:
    for start in range(0, count, 500):
        async with db.write() as session:
            for _ in range(start, min(count, start + 500)):
                now += 0.001
                await submit_job(session, spec, "default", now)
    return now


async def scenario(blocked: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bourse-backlog-") as tmp:
        db = Database(sqlite_url(Path(tmp) / "bourse.db"))
        await db.migrate()
        now = time.time()
        async with db.write() as session:
            await projects.ensure_defaults(session, now)
            session.add_all([node("cpu", 8, 0, now), node("gpu", 96, 8, now)])
        big = JobSpec(command=["true"], compute=Compute(gpu="a100-80gb:8"))
        now = await submit(db, big, 1, now)
        async with db.write() as session:  # the 8-GPU node is busy from now on
            assert (await place_pending(session, now, 30.0, full=False)).placed == 1
        now = await submit(db, big, blocked, now)
        now = await submit(db, JobSpec(command=["true"], compute=Compute(cpus=1)), SMALL, now)
        return await passes(db, now)


async def passes(db: Database, now: float) -> dict[str, float]:
    quick, placed, first = [], 0, None
    while placed < SMALL and len(quick) < 50:
        t0 = time.perf_counter()
        async with db.write() as session:
            report = await place_pending(session, now, 30.0, full=False)
        quick.append(time.perf_counter() - t0)
        placed += report.placed
        first = report.placed if first is None else first
        if report.placed == 0:
            break
    t0 = time.perf_counter()
    async with db.write() as session:
        await place_pending(session, now, 30.0, full=True)
    full = time.perf_counter() - t0
    t0 = time.perf_counter()  # the next periodic pass: the reasons stand, nothing to write
    async with db.write() as session:
        await place_pending(session, now, 30.0, full=True)
    again = time.perf_counter() - t0
    async with db.read() as session:
        told = await session.scalar(select(func.count()).select_from(Job).where(
            Job.state == "PENDING", Job.pending_reason.is_not(None)))
    await db.close()
    return {"first": float(first or 0), "placed": float(placed), "passes": float(len(quick)),
            "quick_ms": 1000 * statistics.median(quick), "full_ms": 1000 * full,
            "again_ms": 1000 * again,
            "told": float(told or 0)}


def show(label: str, runs: list[dict[str, float]], base: list[dict[str, float]]) -> None:
    def med(rs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rs)

    quick = [r["quick_ms"] for r in runs]
    print(f"{label:>16}  first pass placed {med(runs, 'first'):>4.0f}/{SMALL}, all "
          f"{med(runs, 'placed'):>3.0f} in {med(runs, 'passes'):.0f} pass(es); quick pass "
          f"min/med/max {min(quick):6.2f}/{statistics.median(quick):6.2f}/{max(quick):6.2f} ms"
          f" ({statistics.median(quick) / med(base, 'quick_ms'):4.1f}x baseline); full pass "
          f"{med(runs, 'full_ms'):7.1f} ms ({med(runs, 'full_ms') / med(base, 'full_ms'):5.1f}x),"
          f" next {med(runs, 'again_ms'):6.1f} ms; {med(runs, 'told'):.0f} waiting jobs told why")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocked", type=int, nargs="+", default=[210, 2000, 20000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results: dict[int, list[dict[str, float]]] = {b: [] for b in [0, *args.blocked]}
    for _ in range(args.repeat):  # alternated: every size once per round
        for blocked, runs in results.items():
            runs.append(await scenario(blocked))
    base = results[0]
    for blocked, runs in results.items():
        show("baseline (none)" if blocked == 0 else f"{blocked:,} blocked", runs, base)
    print("target: all 20 placed in the first pass, whatever waits ahead of them")


if __name__ == "__main__":
    asyncio.run(main())
