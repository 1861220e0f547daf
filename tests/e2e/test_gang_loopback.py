"""A gang of two real agents on one machine (loopback): placed together, met at rank 0's
port, and a real torchrun (gloo) across both ranks; the loss of one member ends the attempt
for both. tests/gang runs the same across network namespaces."""

from __future__ import annotations

import base64
import os
import signal
import textwrap
from pathlib import Path

import pytest
from harness import Cluster, Exchange

from bourse.protocol.common import JobSpec

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*LeafSpec.*")]
RESUME = Path(__file__).resolve().parent.parent / "gang" / "scripts" / "resume_ddp.py"
EPOCHS = 6

ALL_REDUCE = textwrap.dedent("""\
    import os, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    names = ("MASTER_ADDR", "NODE_RANK", "NNODES", "WORLD_SIZE", "GLOO_SOCKET_IFNAME")
    print("SUM", int(value.item()), *(f"{k}={os.environ[k]}" for k in names), flush=True)
    dist.destroy_process_group()
""")
TORCHRUN = ("exec python -m torch.distributed.run --nnodes $NNODES --node-rank $NODE_RANK "
            "--nproc-per-node 1 --master-addr $MASTER_ADDR --master-port $MASTER_PORT {script}")


def test_torchrun_across_a_two_node_gang(exchange: Exchange, tmp_path: Path) -> None:
    agents = [exchange.agent(f"g{i}", cpus=1, args=["--network", "loop"]) for i in range(2)]
    script = tmp_path / "all_reduce.py"
    script.write_text(ALL_REDUCE)
    job = exchange.client.submit(JobSpec.model_validate({
        "command": ["sh", "-c", TORCHRUN.format(script=script)],
        "compute": {"num_nodes": 2, "cpus": 1}}))
    final = exchange.wait_ended(job.id, 120)
    out = {a.name: a.stdout(job.id, 1).decode() for a in agents}
    assert final.state == "SUCCEEDED", (final, out, exchange.cluster.logs())
    sums = sorted(line for text in out.values() for line in text.splitlines()
                  if line.startswith("SUM"))
    assert sums == [f"SUM 3 MASTER_ADDR=127.0.0.1 NODE_RANK={r} NNODES=2 WORLD_SIZE=2 "
                    "GLOO_SOCKET_IFNAME=lo" for r in (0, 1)]
    assert "all 2 members exited 0" in (final.reason or "")
    logs = b"".join(base64.b64decode(c.data) for c in exchange.client.iter_logs(job.id))
    assert logs.count(b"SUM 3") == 2  # both members' logs reach the exchange


def test_a_member_whose_node_dies_ends_the_attempt_and_the_gang_runs_again(
        exchange: Exchange) -> None:
    """Its agent and its process killed (the machine gone): once its loss window ends the
    other member is stopped and the gang placed again, whole, avoiding the dead node; a cancel
    then stops every member, and none is left running."""
    agents = [exchange.agent(f"k{i}", cpus=1, args=["--network", "loop"]) for i in range(3)]
    job = exchange.client.submit(JobSpec.model_validate({
        "command": ["sh", "-c", "echo rank $NODE_RANK attempt $BOURSE_ATTEMPT; exec sleep 600"],
        "compute": {"num_nodes": 2, "cpus": 1}}))
    members = exchange.wait_for(
        lambda: (found if len(found := [a for a in agents if a.job_pid(job.id, 1)]) == 2
                 else None), 60, "both members' processes")
    victim, survivor = members
    victim.kill9()
    os.kill(victim.job_pid(job.id, 1) or 0, signal.SIGKILL)
    again = exchange.wait_job(job.id, lambda j: j.attempt == 2 and j.state == "RUNNING",
                              exchange.loss_window + 60, "to run again as a gang")
    assert "gang member rank" in " ".join(e.message for e in exchange.client.events(job.id))
    exchange.wait_for(lambda: not _alive(survivor.job_pid(job.id, 1)), 30,
                      "the surviving member of attempt 1 to stop")
    second = [a for a in agents if a.job_pid(job.id, 2)]
    assert victim not in second and again.attempt == 2
    exchange.client.cancel(job.id)
    assert exchange.wait_ended(job.id, 60).state == "CANCELLED"
    for agent in second:
        exchange.wait_for(lambda a=agent: not _alive(a.job_pid(job.id, 2)), 30,  # type: ignore[misc]
                          f"{agent.name}'s member of attempt 2 to stop")


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
    finally:
        cluster.close()
