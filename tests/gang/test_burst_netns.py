"""A burst across real network namespaces: a one-process Lightning run (an exchange job on one
node) is burst to a two-node gang (DDP, one CPU process per namespace); its global step goes
on from the checkpoint, every step is taken once, and its validation accuracy matches an
uninterrupted one-process run's (docs/burst.md). The coordinator and its embedded store listen
on the bridge, so the namespaces reach both."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge import Bridge, require_tools
from harness import Agent, Cluster, Exchange

from bourse.core.compute import Compute
from bourse.protocol.common import JobSpec

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*LeafSpec.*")]
SCRIPT = Path(__file__).resolve().parent / "scripts" / "digits_elastic.py"
EPOCHS, STEP_SLEEP = "6", "0.1"  # 14 steps an epoch, whatever the world size
ACC_TOLERANCE = 0.03  # absolute: the gang's epochs draw the data in another order


@pytest.fixture(scope="module")
def lan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Exchange, list[Agent]]]:
    require_tools()
    bridge = Bridge(2)
    bridge.create()
    cluster = Cluster(tmp_path_factory.mktemp("burst-lan"))
    try:
        exchange = Exchange(cluster, 1.0, host=bridge.host_address,
                            store=("--store-host", bridge.host_address)).start()
        agents = [exchange.agent(f"ns{i}", cpus=1, prefix=bridge.prefix(i),
                                 args=["--network", "lan"]) for i in range(2)]
        yield exchange, agents
    finally:
        cluster.close()
        bridge.delete()


def _uninterrupted(tmp_path: Path) -> dict[str, float]:
    env = {**os.environ, "BOURSE_CHECKPOINT_URI": (tmp_path / "ckpt").as_uri() + "/"}
    env.pop("NNODES", None)
    out = subprocess.run([sys.executable, str(SCRIPT), EPOCHS, "0"], env=env,
                         capture_output=True, text=True, timeout=180, check=True)
    return dict(json.loads(next(x for x in out.stdout.splitlines()
                                if x.startswith("RESULT "))[len("RESULT "):]))


def _lines(agents: list[Agent], job_id: str, attempt: int, prefix: str) -> list[str]:
    return [line for a in agents for line in a.stdout(job_id, attempt).decode().splitlines()
            if line.startswith(prefix)]


def test_a_one_process_run_bursts_to_a_two_node_gang(lan: tuple[Exchange, list[Agent]],
                                                      tmp_path: Path) -> None:
    exchange, agents = lan
    spec = JobSpec(command=["python", str(SCRIPT), EPOCHS, STEP_SLEEP],
                   compute={"cpus": 1, "spot": "prefer"})  # one node; a checkpoint prefix
    job = exchange.client.submit(spec)
    exchange.wait_job(job.id, lambda j: j.state == "RUNNING", 60, "to run")
    exchange.wait_for(lambda: _lines(agents, job.id, 1, "epoch 2 "), 90, "two epochs")

    exchange.client.burst(job.id, Compute(cpus=1, nodes=2, spot="prefer"), notice_s=30)
    done = exchange.wait_ended(job.id, 240)

    assert done.state == "SUCCEEDED", (done.reason, exchange.cluster.logs())
    assert [(a.number, a.rank, a.state) for a in done.attempts] == [
        (1, 0, "PREEMPTED"), (2, 0, "SUCCEEDED"), (2, 1, "SUCCEEDED")]
    saved = max(int(line.split()[3]) for line in _lines(agents, job.id, 1, "epoch "))
    resumed = [line.split() for line in _lines(agents, job.id, 2, "epoch ")]
    assert resumed and all(words[5] == "2" for words in resumed)  # world size 2 from here
    assert int(resumed[0][3]) >= saved  # the global step goes on
    [result] = [json.loads(line[len("RESULT "):]) for line in
                _lines(agents, job.id, 2, "RESULT ")]
    baseline = _uninterrupted(tmp_path)
    assert result["world"] == 2 and result["steps"] == baseline["steps"]  # each step once
    assert math.isclose(result["val_acc"], baseline["val_acc"], abs_tol=ACC_TOLERANCE)
