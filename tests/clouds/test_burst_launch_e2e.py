"""A burst no live node fits, on the simulated AWS account of test_launch_e2e (moto behind
the fault proxy): a Lightning job training on this machine's one CPU node is burst to 8
H100s; the coordinator launches a p5.48xlarge on moto, the instance's user data boots here
(``boot.py``), its agent enrols, and the job's next attempt resumes from the checkpoint the
burst made it save (docs/burst.md)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from boot import Machine, boot
from sim import Sim
from test_launch_e2e import (
    CAPTURE,
    JOB,
    _checked,
    _logs,
    _stdout,
    coordinator,
    user_data,
    wait_instances,
)

from bourse.core.compute import Compute
from bourse.protocol.common import JobSpec

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*LeafSpec.*")]
EPOCHS, STEP_SLEEP = "6", "0.2"  # about 3 s an epoch: still training when the burst comes


@pytest.fixture
def machines() -> Iterator[list[Machine]]:
    made: list[Machine] = []
    yield made
    for machine in made:
        machine.stop()


def test_a_burst_no_node_fits_launches_on_simulated_aws_and_resumes(
        tmp_path: Path, sim: Sim, machines: list[Machine]) -> None:
    from dataplane_harness import stop

    exchange = coordinator(tmp_path, sim).start()
    try:
        local = exchange.agent("local")
        client = exchange.client
        assert exchange.wait_for(lambda: _checked(exchange), 30, "the clouds' check").enabled
        # verified before the job comes: a job no verified node fits yet is launched for
        exchange.wait_for(lambda: any(n.name == "local" and n.verification_status in (
            "pass", "warn") for n in client.nodes()), 60, "the local node's verification")
        job = client.submit(JobSpec(command=[sys.executable, str(JOB), EPOCHS, STEP_SLEEP],
                                    compute={"cpus": 1, "spot": "prefer"}))
        running = exchange.wait_job(job.id, lambda j: j.state == "RUNNING", 90, "to run")
        assert running.node_name == "local"  # the live node, not a launch
        exchange.wait_for(lambda: b"epoch 1 " in local.stdout(job.id, 1), 90, "an epoch")

        moved = client.burst(job.id, Compute("h100:8", spot="prefer"), notice_s=30,
                             reason="eta > 6h")
        assert "h100" in moved.moved_to
        [instance] = wait_instances(exchange, sim, job.id, 1)  # nothing here has a GPU
        assert instance["InstanceType"] == "p5.48xlarge", (
            instance["InstanceType"], [(e.kind, e.message) for e in client.events(job.id)])
        first = client.job(job.id).attempts[0]
        assert first.state == "PREEMPTED" and first.exit_code == 143  # saved on the notice
        machines.append(boot(user_data(sim, instance["InstanceId"]), CAPTURE,
                             tmp_path / "machine"))
        done = exchange.wait_ended(job.id, timeout=180)
        assert done.state == "SUCCEEDED", done.reason
        assert [a.state for a in done.attempts] == ["PREEMPTED", "SUCCEEDED"]
        assert done.attempts[1].node_id not in (None, first.node_id)  # the launched one
        assert b"resume=1 from /" in _stdout(machines[0], job.id, 2)  # the burst's save
        assert b"RESULT " in _logs(exchange, job.id)
        kinds = [e.kind for e in client.events(job.id)]
        assert "burst" in kinds and "moved" in kinds
    finally:
        stop(exchange)
