"""What resource sampling costs.

1. The agent: one sampling round (every live attempt's process tree, directory and the node)
   with N sleeping jobs, against the baseline of reading this machine's process table once
   (group and parent of every process, which every round does anyway), in the same run.
2. The coordinator: storing and judging one `metrics` message of N job samples (one per
   running job, as an agent sends every interval), on SQLite, against storing the same number
   of timeline events in one transaction, in the same run.

    python benchmarks/metrics.py [--jobs 20] [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bourse.agent.metrics import LiveAttempt, NoGpus, Sampler
from bourse.agent.metrics.processes import ProcessTable
from bourse.core.states import AttemptState, JobState
from bourse.protocol.agent import Metrics
from bourse.protocol.metrics import JobSample
from bourse.server.config import MetricsConfig
from bourse.server.db.database import Database, sqlite_url
from bourse.server.db.schema import Attempt, Job
from bourse.server.services.lifecycle import add_event
from bourse.server.services.metrics import record_metrics


def median_ms(run: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        run()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def agent_side(jobs: int, rounds: int, root: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                              start_new_session=True) for _ in range(jobs)]
    try:
        attempts = []
        for i, proc in enumerate(procs):
            (root / f"j{i}" / "work").mkdir(parents=True)
            (root / f"j{i}" / "work" / "data.bin").write_bytes(b"x" * 100_000)
            attempts.append(LiveAttempt(f"j{i}", 1, proc.pid, root / f"j{i}"))
        sampler = Sampler(root, root / "cache", NoGpus(), cache_used=lambda: 0)
        sampler.sample(attempts)
        round_ms = median_ms(lambda: sampler.sample(attempts), rounds)
        base_ms = median_ms(ProcessTable.scan, rounds)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    print(f"agent: one sampling round, {jobs} jobs: {round_ms:.1f} ms "
          f"(baseline, reading the process table once: {base_ms:.1f} ms); "
          f"{round_ms / 5000 * 100:.2f} % of one core at a 5 s interval")


async def seed(db: Database, jobs: int) -> None:
    async with db.write() as session:
        for i in range(jobs):
            session.add(Job(id=f"j{i}", state=JobState.RUNNING.value, spec={"command": ["x"]},
                            created_at=0.0, updated_at=0.0, attempt=1, node_id="n1",
                            avoid_nodes=[]))
    async with db.write() as session:
        for i in range(jobs):
            session.add(Attempt(job_id=f"j{i}", number=1, node_id="n1",
                                state=AttemptState.RUNNING.value, placed_at=0.0,
                                start_deadline=0.0, resources={}))


async def coordinator_side(jobs: int, rounds: int, root: Path) -> None:
    db = Database(sqlite_url(root / "bench.db"))
    await db.migrate()
    await seed(db, jobs)
    config = MetricsConfig()
    samples_ms, events_ms = [], []
    for r in range(rounds):
        message = Metrics(jobs=[JobSample(job_id=f"j{i}", attempt=1, time=1000.0 + 5 * r,
                                          cpu_percent=50.0, memory_bytes=1 << 30)
                                for i in range(jobs)])
        t0 = time.perf_counter()
        async with db.write() as session:
            await record_metrics(session, "n1", [message], config, 1000.0 + 5 * r)
        samples_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        async with db.write() as session:
            for i in range(jobs):
                add_event(session, f"j{i}", 1, "info", 1000.0 + r, message="progress")
        events_ms.append((time.perf_counter() - t0) * 1000)
    await db.close()
    print(f"coordinator: one metrics message of {jobs} job samples stored and judged: "
          f"{statistics.median(samples_ms):.1f} ms (baseline, {jobs} timeline events in one "
          f"transaction: {statistics.median(events_ms):.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        agent_side(args.jobs, args.rounds, Path(tmp) / "agent")
        asyncio.run(coordinator_side(args.jobs, args.rounds, Path(tmp)))


if __name__ == "__main__":
    main()
