"""A GPU job on an exchange with no GPU node and Lambda Cloud enabled, with real processes: a
coordinator (`bourse server --cloud lambda`) whose API calls go to the replayed Lambda API
(``lambda_sim``, served on 127.0.0.1 by this test); the job asking for 8 H100s launches
Lambda's gpu_8x_h100_sxm5 in the region that lists capacity; the instance's user data (as
the replay received it) boots on this machine (``boot.py``: an nvidia-smi replaying a real
8x H100 capture); its agent enrols, is verified, runs the job; once idle the instance is
terminated through the API; and the API key appears in none of the coordinator's output."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from boot import Machine, boot
from lambda_sim import KEY, LambdaSim, serve

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "dataplane"))

from dataplane_harness import stop
from harness import Cluster, Exchange

from bourse.protocol.common import JobSpec

pytestmark = [pytest.mark.slow]
CAPTURE = "txt-h100-80gb-hbm3-x8-drv535.txt"
H100X8 = "gpu_8x_h100_sxm5"
IDLE_S = 6


@pytest.fixture
def machines() -> Iterator[list[Machine]]:
    made: list[Machine] = []
    yield made
    for machine in made:
        machine.stop()


def _lambda(exchange: Exchange) -> Any:
    [found] = [c for c in exchange.client.clouds().clouds if c.name == "lambda"]
    return found if found.enabled or not (found.reason or "").startswith("not checked") else None


def test_a_gpu_job_runs_on_a_launched_lambda_instance(tmp_path: Path,
                                                      machines: list[Machine]) -> None:
    sim = LambdaSim(capacity={H100X8: {"us-west-1"}})
    with serve(sim) as url:
        env = {"LAMBDA_API_KEY": KEY, "BOURSE_LAMBDA_API_URL": url}
        args = ["--cloud", "lambda", "--lambda-regions", "us-east-1,us-west-1",
                "--idle-timeout", f"{IDLE_S}s", "--boot-timeout", "3m"]
        exchange = Exchange(Cluster(tmp_path), 1.0, loss_window=10.0, args=args, env=env)
        exchange.start()
        try:
            checked = exchange.wait_for(lambda: _lambda(exchange), 30, "the clouds' check")
            assert checked.enabled, checked.reason
            job = exchange.client.submit(JobSpec(
                command=[sys.executable, "-c", "print('RESULT on lambda')"],
                compute={"gpu": "h100:8"}))
            exchange.wait_for(lambda: sim.instances, 60, "a launch on the replayed API")
            [(iid, inst)] = sim.instances.items()
            assert (inst["region"]["name"], inst["instance_type"]["name"]) == ("us-west-1",
                                                                                H100X8)
            machines.append(boot(sim.user_data[iid], CAPTURE, tmp_path / "machine"))
            done = exchange.wait_ended(job.id, timeout=180)
            assert done.state == "SUCCEEDED", done.reason
            exchange.wait_for(lambda: inst["status"] == "terminating", 60,
                              "the idle instance's termination")
            log = exchange.coordinator.proc.log.read_bytes()
            assert b"lambda" in log and KEY.encode() not in log
        finally:
            stop(exchange)
