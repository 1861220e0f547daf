"""Burst hand-over: a running job moved to another Compute (``bourse burst``) -> its training
loop running again, beside a spot reclaim's hand-over measured in the same run (the baseline:
the same checkpoint -> relaunch -> resume path, issue 7), runs alternated on one job.

Real processes, as benchmarks/recovery.py: a coordinator with its embedded SeaweedFS, two
interruptible agents (tests/spot's harness), and the PyTorch job of benchmarks/_recovery_job.py,
which prints when each of its phases ends. Each burst alternates the job's Compute between
one and two CPUs (a burst to the Compute it has is refused).

Hand-over = the final checkpoint complete (``saved``, on the old node) -> the loop running again
(``loop``, on the new one), less the new process's imports and model setup (the model's own
cost, which a bigger model changes and bourse does not) — there is no cloud launch here (one
is measured by benchmarks/launch.py). Target (issue 22): p50 <= 5 s, the bar of spot recovery.

    python benchmarks/burst.py [--runs 5]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "dataplane"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "spot"))

from dataplane_harness import stop
from harness import Agent, Cluster, Exchange
from spot_harness import node_state, renew

from _exchange import percentile
from bourse.core.compute import Compute
from bourse.protocol.api import JobDetail
from recovery import (  # the reclaim side: the same job, harness and phases
    NOTICE_S,
    Spot,
    attempt,
    end_job,
    exited_at,
    phases,
    reclaim_once,
    start_job,
    wait_phase,
)

TARGET_S = 5.0
Phases = dict[str, float]


def burst_once(spot: Spot, job_id: str, number: int, current: Agent, cpus: int) -> tuple[
        Phases, Agent]:
    exchange = spot.exchange
    t0 = time.time()
    exchange.client.burst(job_id, Compute(cpus=f"{cpus}..{cpus}", spot="only"),
                          notice_s=NOTICE_S, reason="benchmark")
    def placed() -> JobDetail | None:
        found = exchange.client.job(job_id)
        return found if found.attempt == number + 1 and found.node_id else None

    detail = exchange.wait_for(placed, 60, "the next attempt placed")
    target = next(a for a in spot.agents if detail and a.node_id == detail.node_id)
    again = wait_phase(exchange, target, job_id, number + 1, "loop")
    detail = exchange.client.job(job_id)
    first, second = attempt(detail, number), attempt(detail, number + 1)
    before = phases(current, job_id, number)
    assert first.state == "PREEMPTED" and first.ended_at is not None, first
    return split(t0, before, again, exited=exited_at(exchange, job_id, number),
                 ended=first.ended_at, placed=second.placed_at), target


def split(t0: float, before: Phases, again: Phases, *, exited: float, ended: float,
          placed: float) -> Phases:
    setup = again["setup"] - again["started"]  # imports and the model's setup
    handover = again["loop"] - before["saved"]
    return {"request -> checkpoint saved": before["saved"] - t0,
            "saved -> process gone": exited - before["saved"],
            "-> attempt ended": ended - exited, "-> next attempt placed": placed - ended,
            "-> process started": again["started"] - placed, "imports + model setup": setup,
            "-> loop running": again["loop"] - again["setup"],
            "hand-over excl. setup": handover - setup}


def from_reclaim(result: Phases) -> Phases:
    """recovery.py's split of a reclaim, as hand-over (saved -> loop, less setup)."""
    setup = result["imports"] + result["model setup (torch)"]
    handover = (result["total"] - result["notice reaches the job"]
                - result["final checkpoint upload"])
    return {"hand-over excl. setup": handover - setup, "imports + model setup": setup}


def show(label: str, result: Phases) -> None:
    print(f"  {label}: " + ", ".join(f"{k} {v:.2f}" for k, v in result.items()), flush=True)


def summary(name: str, values: list[float]) -> str:
    return (f"{name:28s} min {min(values):6.2f}  p50 {percentile(values, 0.5):6.2f}  "
            f"max {max(values):6.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="bursts (and as many reclaims)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bourse-bench-burst-"))
    exchange = Exchange(Cluster(root), 1.0, store=(), loss_window=1.0).start()
    bursts: list[Phases] = []
    reclaims: list[Phases] = []
    try:
        spot = Spot(exchange, 1.0, "burst")
        job_id, current, other = start_job(spot, [])
        number = 1
        for run in range(1, args.runs + 1):
            wait_phase(exchange, current, job_id, number, "saved")
            result, current = burst_once(spot, job_id, number, current, 2 - run % 2)
            bursts.append(result)
            show(f"burst {run}/{args.runs}", result)
            number += 1
            other = next(a for a in spot.agents if a is not current)
            wait_phase(exchange, current, job_id, number, "saved")
            if node_state(exchange, other) != "online":
                renew(exchange, other)
            reclaims.append(from_reclaim(reclaim_once(exchange, job_id, number, current,
                                                      other)))
            show(f"reclaim {run}/{args.runs}", reclaims[-1])
            number += 1
            current, other = other, current
            spot.ensure_online()
        end_job(exchange, job_id)
        spot.close()
    except AssertionError as exc:
        print(f"FAILED: {exc}\n{exchange.cluster.logs()}")
        return 1
    finally:
        stop(exchange)
        shutil.rmtree(root, ignore_errors=True)
    report(bursts, reclaims)
    return 0


def report(bursts: list[Phases], reclaims: list[Phases]) -> None:
    print(f"\nburst -> loop running on the new Compute, {len(bursts)} runs, seconds:")
    for name in bursts[0]:
        print("  " + summary(name, [r[name] for r in bursts]))
    ours = [r["hand-over excl. setup"] for r in bursts]
    base = [r["hand-over excl. setup"] for r in reclaims]
    print("baseline, spot reclaim in the same run:")
    print("  " + summary("hand-over excl. setup", base))
    p50, base_p50 = percentile(ours, 0.5), percentile(base, 0.5)
    print(f"target: hand-over excl. setup p50 <= {TARGET_S:g} s: "
          f"{'met' if p50 <= TARGET_S else 'NOT met'} ({p50:.2f} s; x{p50 / base_p50:.2f} the "
          "reclaim's)")


if __name__ == "__main__":
    sys.exit(main())
