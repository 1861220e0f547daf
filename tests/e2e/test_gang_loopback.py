"""A gang of real agents on one machine (loopback), with the embedded store: a Lightning DDP
gang that loses a node resumes from its checkpoint on every rank, and no member of any attempt
is left running. tests/gang runs Lightning and torchrun across network namespaces."""

from __future__ import annotations

import base64
import os
import signal
from pathlib import Path

import pytest
from harness import Cluster, Exchange

from bourse.protocol.common import JobSpec

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*LeafSpec.*")]
RESUME = Path(__file__).resolve().parent.parent / "gang" / "scripts" / "resume_ddp.py"
EPOCHS = 6


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_lightning_gang_that_loses_a_node_resumes_from_its_checkpoint(
        tmp_path: Path) -> None:
    """Lightning DDP (gloo) on two real agents with the embedded store: one member's machine
    dies mid-training (agent and process SIGKILLed); the gang is placed again whole, resumes
    from the last epoch's checkpoint on every rank, and ends with the global step of an
    uninterrupted run and identical parameters on both ranks."""
    cluster = Cluster(tmp_path)
    try:
        exchange = Exchange(cluster, 1.0, store=(), loss_window=6.0).start()
        agents = [exchange.agent(f"r{i}", cpus=1, args=["--network", "loop"])
                  for i in range(3)]
        job = exchange.client.submit(JobSpec.model_validate({
            "command": ["python", str(RESUME), str(EPOCHS), "0.05"],
            "compute": {"num_nodes": 2, "cpus": 1}}))
        first = exchange.wait_for(
            lambda: next((a for a in agents if b"epoch 2 " in a.stdout(job.id, 1)), None),
            120, "two epochs on rank 0")
        victim = next(a for a in agents if a is not first and a.job_pid(job.id, 1))
        victim.kill9()
        os.kill(victim.job_pid(job.id, 1) or 0, signal.SIGKILL)
        exchange.wait_for(lambda: not _alive(first.job_pid(job.id, 1)),
                          exchange.loss_window + 60, "the surviving member to be stopped")
        final = exchange.wait_ended(job.id, 240)
        out = {a.name: a.stdout(job.id, 2).decode() for a in agents if a is not victim}
        assert final.state == "SUCCEEDED", (final, out, cluster.logs())
        assert final.attempt == 2
        results = sorted(line.split(" ", 2)[1:] for text in out.values()
                         for line in text.splitlines() if line.startswith("RESULT "))
        steps = EPOCHS * 16 // 2  # 256 samples, batches of 16, split over two ranks
        assert [r[0] for r in results] == ["rank=0", "rank=1"]
        assert {r[1] for r in results} == {f"world=2 steps={steps} " + results[0][1].split()[-1]}
        resumed = [line for text in out.values() for line in text.splitlines()
                   if line.startswith("resume=")]
        assert len(resumed) == 2 and all(line != "resume=none" for line in resumed), resumed
        assert "epoch 0 " not in "".join(out.values())  # it went on, not from the start
        assert victim not in [a for a in agents if a.job_pid(job.id, 2)]
        rank1 = b"".join(base64.b64decode(c.data)
                         for c in exchange.client.iter_logs(job.id, rank=1)).decode()
        assert "RESULT rank=1 " in rank1 and "RESULT rank=0 " not in rank1
        left = [a.name for a in agents for n in (1, 2) if _alive(a.job_pid(job.id, n))]
        assert left == []  # no member of either attempt outlives the gang
    finally:
        cluster.close()
