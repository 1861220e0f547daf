"""Dispatch latency: submit -> RUNNING on an idle local agent, p50 and p99 over 200 jobs.

Printed beside it, in the same run: the time this machine takes to spawn ``python -c pass``
(the floor any process-based runtime stands on). Target (issue 3): p50 <= 150 ms,
p99 <= 500 ms.

    python benchmarks/dispatch.py [--jobs 200]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from _exchange import local_exchange, percentile
from bourse.protocol.common import JobSpec


def spawn_python(runs: int = 30) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def running_at(client, job_id: str) -> float | None:  # type: ignore[no-untyped-def]
    for event in client.events(job_id):
        if event.kind == "state" and event.state == "RUNNING":
            return float(event.time)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    args = parser.parse_args()
    spawn = spawn_python()
    latencies = []
    with local_exchange(agents=1) as (client, status, _root):
        print(f"local exchange at {status.url}")
        for i in range(args.jobs + 5):
            submitted = time.time()
            job = client.submit(JobSpec(command=["true"], name=f"dispatch-{i}"))
            final = client.wait(job.id, poll_s=0.02)
            if final.state != "SUCCEEDED":
                print(f"job {job.id} ended {final.state}: {final.reason}")
                return 1
            at = running_at(client, job.id)
            if i >= 5 and at is not None:  # the first few warm the caches
                latencies.append((at - submitted) * 1000)
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    print(f"python -c pass spawn   p50 {statistics.median(spawn):6.1f} ms")
    print(f"submit -> RUNNING      p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  "
          f"max {max(latencies):6.1f} ms  over {len(latencies)} jobs")
    print(f"ratio to python spawn  p50 x{p50 / statistics.median(spawn):.1f}")
    met = p50 <= 150 and p99 <= 500
    print(f"target p50 <= 150 ms, p99 <= 500 ms: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
