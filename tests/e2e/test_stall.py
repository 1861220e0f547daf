"""Stall detection end to end: a real `bourse server` (stall window 3 s) and `bourse agent`
(sampling every 0.5 s) run a job that sleeps and a job that computes; only the sleeper is
flagged, with its evidence, and the flag clears once it prints and computes again."""

from __future__ import annotations

import sys

import pytest
from harness import Agent, Cluster, Exchange

from bourse.core.compute import Compute
from bourse.protocol.common import JobSpec

pytestmark = pytest.mark.slow
STALL_AFTER_S = 3.0
KEEP_ALIVE_S = 1.0

# sleeps silently for a while, then computes and prints (so the flag must clear)
SLEEPER = """\
import time
time.sleep(8)
end = time.time() + 30
while time.time() < end:
    sum(range(10000))
    print("working", flush=True) if int(time.time() * 10) % 5 == 0 else None
"""
COMPUTER = """\
import time
end = time.time() + 30
while time.time() < end:
    sum(range(10000))
"""


def _job(script: str, name: str) -> JobSpec:
    return JobSpec(command=[sys.executable, "-c", script], name=name,
                   compute=Compute(cpus=1), max_retries=0)


def test_a_sleeping_job_is_flagged_and_a_computing_one_is_not(cluster: Cluster) -> None:
    exchange = Exchange(cluster, KEEP_ALIVE_S)
    exchange.coordinator.proc.args += ["--stall-after", str(STALL_AFTER_S)]
    exchange.start()
    agent = Agent(cluster, "node", exchange.coordinator.url, KEEP_ALIVE_S)
    agent.proc.args += ["--metrics-interval", "0.5", "--storage-mb", "4"]
    agent.start(exchange.client.create_enrollment(name="node").token)
    exchange.wait_connected(agent)
    client = exchange.client
    sleeper = client.submit(_job(SLEEPER, "sleeper")).id
    computer = client.submit(_job(COMPUTER, "computer")).id

    flagged = exchange.wait_job(sleeper, lambda j: j.stalled is not None, 60,
                                "to be flagged stalled")
    assert flagged.stalled is not None and flagged.stalled.kind == "no_progress"
    assert flagged.stalled.evidence["max_cpu_percent"] < 2.0
    computing = client.job(computer)
    assert computing.state == "RUNNING" and computing.stalled is None
    samples = client.job_metrics(computer).samples
    # a core's worth when the machine is idle; a loaded 2-core CI machine shares it
    assert samples and max(s.cpu_percent or 0 for s in samples) > 10

    exchange.wait_job(sleeper, lambda j: j.stalled is None, 30, "to be active again")
    kinds = [e.kind for e in client.events(sleeper) if e.kind in ("stalled", "active")]
    assert kinds == ["stalled", "active"]
    assert [e for e in client.events(computer) if e.kind == "stalled"] == []
    for job in (sleeper, computer):
        client.cancel(job)
