"""Gangs (issue 19): how much longer a 4-node gang takes to start than a one-node job, on real
processes — a coordinator (SQLite, no store) and four real agents on this machine's loopback,
every agent of one network — and how often the rendezvous succeeds.

Each run, alternated: a one-node job (the baseline, same run), then a 4-node gang; each is
timed from its submit to every member RUNNING (the job detail polled every 10 ms), then
cancelled and waited for. The figure is the gang's time less the baseline's of the same run
(targets: p50 <= 1 s, p99 <= 2 s beyond it); the rendezvous count is the gangs whose first
attempt started on all four nodes (target: every one, 50 of 50). Then, as many times, two gangs
of three submitted at once on the four nodes, which cannot both run: each must end (a short
command), neither retried — a deadlock or a partial hold would leave one waiting forever.

    python benchmarks/gang.py [--runs 50] [--nodes 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))

from harness import Cluster, Exchange

from bourse.protocol.api import JobDetail
from bourse.protocol.common import JobSpec

POLL_S = 0.01
SLEEP = ["sh", "-c", "exec sleep 120"]


def started(exchange: Exchange, nodes: int) -> tuple[float, bool]:
    """Seconds from submit to every member RUNNING; whether its first attempt made it."""
    spec = JobSpec.model_validate({"command": SLEEP, "compute": {"num_nodes": nodes,
                                                                 "cpus": 1}})
    begun = time.perf_counter()
    job = exchange.client.submit(spec)
    detail = exchange.client.job(job.id)
    while not _all_running(detail, nodes):
        if detail.state in ("FAILED", "CANCELLED", "SUCCEEDED"):
            raise AssertionError(f"job {job.id} ended: {detail.reason}")
        time.sleep(POLL_S)
        detail = exchange.client.job(job.id)
    took = time.perf_counter() - begun
    exchange.client.cancel(job.id)
    exchange.wait_ended(job.id, 60)
    return took, detail.attempt == 1


def compete(exchange: Exchange, size: int) -> tuple[float, bool]:
    """Two gangs of ``size`` submitted at once: seconds until both ended; whether both
    succeeded on their first attempt."""
    spec = JobSpec.model_validate({"command": ["true"], "compute": {"num_nodes": size,
                                                                    "cpus": 1}})
    begun = time.perf_counter()
    jobs = [exchange.client.submit(spec) for _ in range(2)]
    finals = [exchange.wait_ended(job.id, 60) for job in jobs]
    took = time.perf_counter() - begun
    return took, all(f.state == "SUCCEEDED" and f.attempt == 1 for f in finals)


def _all_running(detail: JobDetail, nodes: int) -> bool:
    current = [a for a in detail.attempts if a.number == detail.attempt]
    return len(current) == nodes and all(a.state == "RUNNING" for a in current)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def describe(name: str, values: list[float]) -> str:
    return (f"{name:<28} min {min(values) * 1000:7.0f}  p50 {quantile(values, 0.5) * 1000:7.0f}"
            f"  p99 {quantile(values, 0.99) * 1000:7.0f}  max {max(values) * 1000:7.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--nodes", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bourse-gang-bench-") as root:
        cluster = Cluster(Path(root))
        try:
            exchange = Exchange(cluster, keep_alive=5.0, loss_window=60.0).start()
            for i in range(args.nodes):
                exchange.agent(f"node{i}", cpus=1, args=["--network", "bench"])
            started(exchange, 1)  # warm: first imports, first environment
            started(exchange, args.nodes)
            single, gang, extra, met = [], [], [], 0
            for _ in range(args.runs):
                one, _ok = started(exchange, 1)
                whole, ok = started(exchange, args.nodes)
                single.append(one)
                gang.append(whole)
                extra.append(whole - one)
                met += ok
            pairs, clean = [], 0
            for _ in range(args.runs):
                took, ok = compete(exchange, args.nodes - 1)
                pairs.append(took)
                clean += ok
        finally:
            cluster.close()
    print(f"{args.runs} runs, alternated, {args.nodes} real agents on loopback")
    print(describe("one-node job (baseline)", single))
    print(describe(f"{args.nodes}-node gang", gang))
    print(describe("gang beyond the baseline", extra))
    ratio = statistics.median(gang) / statistics.median(single)
    print(f"ratio gang / baseline (p50)   {ratio:.2f}")
    print(f"rendezvous on the first attempt: {met} of {args.runs}")
    print(describe(f"two {args.nodes - 1}-node gangs, both", pairs))
    print(f"competing pairs that both succeeded first time: {clean} of {args.runs}")


if __name__ == "__main__":
    main()
