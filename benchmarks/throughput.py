"""Throughput: 2,000 tiny jobs (``true``) through 4 local agents; completed jobs per second.

The clock runs from the first submit to the last job's end (its final state change). Jobs are
submitted either one request each from 16 concurrent clients (``--mode single``), or in
requests of 100 through the batch endpoint (``--mode batch``, how a sweep or an array job
arrives); ``--mode both`` runs both on fresh exchanges. Printed beside it, in the same run: how
fast this machine spawns ``true`` on its own, and the CPU time each part spent per job (the
coordinator; the agents with the jobs they started): on a shared machine, where the rate drifts
with the load, these say whether a change made the exchange cheaper. Target (issue 3):
>= 100 jobs/s.

``--idle 1000`` adds the idle-node axis (issue 24): each mode runs again with that many
simulated agents connected (``bourse.agent.sim``, no free CPU: they cannot take the work,
heartbeating at the default 20 s keep-alive from this process), alternated with runs without
them (``--runs``), and prints the ratio of the rates and of the coordinator's CPU per job.
Target: within 10 %.

    python benchmarks/throughput.py [--jobs 2000] [--agents 4] [--mode both] [--idle 0]
                                    [--runs 1]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import psutil

from _exchange import local_exchange
from _fleet import Fleet, no_room
from bourse.protocol.common import JobSpec
from bourse.sdk.async_client import AsyncClient
from bourse.sdk.config import load_credentials


def spawn_rate(runs: int = 200) -> float:
    t0 = time.perf_counter()
    for _ in range(runs):
        subprocess.run(["true"], check=True)
    return runs / (time.perf_counter() - t0)


def specs(start: int, count: int) -> list[JobSpec]:
    return [JobSpec(command=["true"], name=f"tp-{i}") for i in range(start, start + count)]


async def submit_all(url: str, token: str, jobs: int, batch: int,
                     concurrency: int = 16) -> list[str]:
    """Submit ``jobs`` jobs, ``batch`` per request (1 = the plain submit endpoint); their ids
    in submission order."""
    starts = list(range(0, jobs, batch))[::-1]
    ids: dict[int, list[str]] = {}

    async def worker() -> None:
        async with AsyncClient(url, token, timeout=120) as client:
            while starts:
                start = starts.pop()
                count = min(batch, jobs - start)
                if batch == 1:
                    ids[start] = [(await client.submit(specs(start, 1)[0])).id]
                else:
                    ids[start] = [j.id for j in await client.submit_many(specs(start, count))]

    await asyncio.gather(*(worker() for _ in range(concurrency if batch == 1 else 2)))
    return [job for start in sorted(ids) for job in ids[start]]


async def wait_all(url: str, token: str, ids: list[str]) -> tuple[int, int, float]:
    """Wait for the last jobs submitted (polling only them, so that measuring adds no load),
    then count every outcome."""
    async with AsyncClient(url, token, timeout=120) as client:
        for job_id in ids[-8:]:
            while (await client.job(job_id)).state not in ("SUCCEEDED", "FAILED", "CANCELLED"):
                await asyncio.sleep(0.2)
        while True:
            done = await client.jobs(state="SUCCEEDED", limit=10000)
            failed = await client.jobs(state="FAILED", limit=10000)
            if len(done) + len(failed) >= len(ids):
                last = max(j.updated_at for j in [*done, *failed])
                return len(done), len(failed), last
            await asyncio.sleep(0.5)


def cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU time of a process (and of its children it has reaped)."""
    times = psutil.Process(pid).cpu_times()
    own = times.user + times.system
    return own + (times.children_user + times.children_system if children else 0.0)


@dataclass
class Rate:
    jobs_s: float  # 0 when a job failed
    coordinator_ms: float  # CPU per job


def run(mode: str, jobs: int, agents: int, job_users: bool = False, idle: int = 0) -> Rate:
    batch = 1 if mode == "single" else 100
    with local_exchange(agents=agents, reachable=job_users) as (_, status, _):
        def spent() -> tuple[float, float]:
            return (cpu_seconds(status.server_pid),
                    sum(cpu_seconds(pid, children=True) for pid in status.agent_pids))

        creds = load_credentials()
        fleet = Fleet(creds.url, creds.token, idle, caps=no_room(), keep_alive_s=20.0,
                      prefix="idle")
        try:
            fleet.start()
            before = spent()
            t0 = time.time()
            ids = asyncio.run(submit_all(creds.url, creds.token, jobs, batch))
            submitted = time.time() - t0
            ok, failed, last = asyncio.run(wait_all(creds.url, creds.token, ids))
            after = spent()
        finally:
            fleet.stop()
    count = len(ids)
    elapsed = last - t0
    rate = count / elapsed
    coordinator, agent = ((a - b) / count * 1000 for a, b in zip(after, before, strict=True))
    mode += " (job users)" if job_users else ""
    print(f"{mode:6s}  {count} jobs, {agents} agents, {idle} idle: submitted in "
          f"{submitted:5.1f} s, all ended after {elapsed:5.1f} s ({ok} succeeded, {failed} "
          f"failed): {rate:6.1f} jobs/s; CPU per job: coordinator {coordinator:.1f} ms, "
          f"agents and jobs {agent:.1f} ms", flush=True)
    return Rate(rate if failed == 0 else 0.0, coordinator)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--mode", choices=["single", "batch", "both"], default="both")
    parser.add_argument("--job-users", action="store_true",
                        help="run as root with a work dir other users can reach, so that each "
                             "job runs as its own user (docs/security.md)")
    parser.add_argument("--idle", type=int, default=0,
                        help="also run with this many idle simulated agents connected")
    parser.add_argument("--runs", type=int, default=1, help="runs of each, alternated")
    args = parser.parse_args()
    baseline = spawn_rate()
    modes = ["single", "batch"] if args.mode == "both" else [args.mode]
    idles = [0, args.idle] if args.idle else [0]
    rates: dict[tuple[str, int], list[Rate]] = {}
    for mode in modes:
        for n in range(args.runs):
            for idle in idles if n % 2 == 0 else idles[::-1]:
                rates.setdefault((mode, idle), []).append(
                    run(mode, args.jobs, args.agents, args.job_users, idle))
    print(f"baseline: this machine alone spawns and reaps `true` at {baseline:.0f}/s")
    for (mode, idle), found in rates.items():
        rate = statistics.median(r.jobs_s for r in found)
        print(f"{mode} submits, {idle} idle nodes: median {rate:.1f} jobs/s (min "
              f"{min(r.jobs_s for r in found):.1f}, max {max(r.jobs_s for r in found):.1f})")
        if not idle:
            print(f"target >= 100 jobs/s ({mode} submits): {'met' if rate >= 100 else 'NOT met'}")
    for mode in modes if args.idle else []:
        alone, crowded = rates[(mode, 0)], rates[(mode, args.idle)]
        ratio = statistics.median(r.jobs_s for r in crowded) / statistics.median(
            r.jobs_s for r in alone)
        cpu = statistics.median(r.coordinator_ms for r in crowded) / statistics.median(
            r.coordinator_ms for r in alone)
        print(f"{mode} submits: {args.idle} idle nodes / none: throughput x{ratio:.2f}, "
              f"coordinator CPU per job x{cpu:.2f} (target: throughput within 10 %: "
              f"{'met' if ratio >= 0.9 else 'NOT met'})")
    return 0 if all(r.jobs_s for found in rates.values() for r in found) else 1

if __name__ == "__main__":
    sys.exit(main())
