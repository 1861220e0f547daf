"""Gangs across real network namespaces: a coordinator on the host, agents each in a
namespace of its own on one bridge (bridge.py; three started, a fourth when a test asks), and
`bourse run --nodes N`-style jobs: a Lightning DDP script and a torchrun script, unchanged,
train across two nodes and end with identical parameters on every rank; a gang larger than the
network waits, holding nothing, until a node joins; two gangs wanting the same nodes run one
after the other."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge import Bridge, require_tools
from harness import Agent, Cluster, Exchange

from bourse.protocol.common import JobSpec

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*LeafSpec.*")]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tasks" / "skypilot"
TORCHRUN = ("exec python -m torch.distributed.run --nnodes $NNODES --node-rank $NODE_RANK "
            "--nproc-per-node 1 --master-addr $MASTER_ADDR --master-port $MASTER_PORT "
            f"{SCRIPTS / 'torchrun_ddp.py'}")


class Lan:
    def __init__(self, bridge: Bridge, exchange: Exchange) -> None:
        self.bridge, self.exchange = bridge, exchange
        self.agents = [self._agent(i) for i in range(bridge.count - 1)]

    def _agent(self, i: int) -> Agent:
        return self.exchange.agent(f"ns{i}", cpus=1, prefix=self.bridge.prefix(i),
                                   args=["--network", "lan"])

    def join_last(self) -> None:
        """The bridge's last node joins the exchange (once)."""
        if len(self.agents) < self.bridge.count:
            self.agents.append(self._agent(self.bridge.count - 1))

    def submit(self, command: list[str], nodes: int) -> str:
        return self.exchange.client.submit(JobSpec.model_validate({
            "command": command, "compute": {"num_nodes": nodes, "cpus": 1}})).id

    def run(self, command: list[str]) -> dict[int, str]:
        """The job's stdout on each node, by the node's index; what the exchange has of it
        must hold both members' lines."""
        job = self.exchange.client.job(self.submit(command, 2))
        final = self.exchange.wait_ended(job.id, 180)
        out = {i: a.stdout(job.id, final.attempt).decode() for i, a in enumerate(self.agents)}
        # a string, not a tuple: pytest shortens a tuple's repr to 240 characters
        assert final.state == "SUCCEEDED", f"{final}\n{out}\n{self.exchange.cluster.logs()}"
        assert final.attempt == 1
        stored = b"".join(base64.b64decode(c.data) for c in
                          self.exchange.client.iter_logs(job.id)).decode()
        assert sorted(stored.count(f"rank={r} ") for r in (0, 1)) == [1, 1], stored
        return out


@pytest.fixture(scope="module")
def lan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lan]:
    require_tools()
    bridge = Bridge(4)
    bridge.create()
    cluster = Cluster(tmp_path_factory.mktemp("lan"))
    try:
        exchange = Exchange(cluster, 1.0, host=bridge.host_address).start()
        yield Lan(bridge, exchange)
    finally:
        cluster.close()
        bridge.delete()


def checksums(out: dict[int, str]) -> list[str]:
    return sorted(line for text in out.values() for line in text.splitlines()
                  if line.startswith("CHECKSUM "))


def test_a_lightning_ddp_script_trains_across_two_namespaces(lan: Lan) -> None:
    out = lan.run(["sh", "-c", f"env | grep -E '^(MASTER_ADDR|GLOO_SOCKET_IFNAME)=' | sort; "
                   f"exec python {SCRIPTS / 'lightning_ddp.py'}"])
    lines = checksums(out)
    assert [line.split()[1:3] for line in lines] == [["rank=0", "world=2"],
                                                     ["rank=1", "world=2"]]
    assert len({line.split()[-1] for line in lines}) == 1  # DDP averaged every step
    ran = {i: text for i, text in out.items() if text}
    assert len(ran) == 2
    for i, text in ran.items():
        assert f"GLOO_SOCKET_IFNAME={lan.bridge.ifname(i)}" in text
        assert "MASTER_ADDR=10.204." in text  # rank 0's address on the bridge, not loopback


def test_bourse_run_nodes_2_runs_a_torchrun_script_across_two_namespaces(lan: Lan) -> None:
    """The command line as a user types it: attached, it prints both members' output with
    their ranks and exits with the job's code."""
    env = {**os.environ, "BOURSE_URL": lan.exchange.coordinator.url,
           "BOURSE_TOKEN": lan.exchange.coordinator.token}
    done = subprocess.run([sys.executable, "-m", "bourse", "run", "--nodes", "2", "--cpus", "1",
                           "--no-code", "--", "sh", "-c", TORCHRUN], env=env,
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, \
        f"{done.stdout}\n{done.stderr}\n{lan.exchange.cluster.logs()}"
    lines = sorted(line for line in done.stdout.splitlines() if "CHECKSUM " in line)
    assert [line.split()[:4] for line in lines] == [
        ["[rank", "0]", "CHECKSUM", "rank=0"], ["[rank", "1]", "CHECKSUM", "rank=1"]], lines
    assert all(" world=2 " in line for line in lines)
    assert len({line.split()[-1] for line in lines}) == 1  # identical parameters


def test_skypilot_s_own_multi_node_check_passes_unchanged(lan: Lan, tmp_path: Path) -> None:
    """SkyPilot's env_check.yaml (tests/fixtures/tasks/skypilot) on two nodes: setup's
    ~/.bashrc line reaches run, ~/sky_workdir is the workdir (run from a directory holding a
    sky/ folder, as in SkyPilot's repository), SKYPILOT_NODE_RANK, two SKYPILOT_NODE_IPS
    lines and SKYPILOT_TASK_ID are set on every rank. Unchanged but for the setup lines that
    check that SkyPilot leaves CUDA_VISIBLE_DEVICES unset in setup: bourse sets it to the
    job's GPUs (empty here), and the translation says so."""
    fixture = FIXTURES / "env_check.yaml"
    text = fixture.read_text()
    checks = [line for line in text.splitlines() if "CUDA_VISIBLE_DEVICES" in line]
    assert len(checks) == 3
    for line in checks:
        text = text.replace(line + "\n", "")
    (tmp_path / fixture.name).write_text(text)
    (tmp_path / "sky").mkdir()
    (tmp_path / "sky" / "__init__.py").write_text("")
    env = {**os.environ, "BOURSE_URL": lan.exchange.coordinator.url,
           "BOURSE_TOKEN": lan.exchange.coordinator.token}
    done = subprocess.run([sys.executable, "-m", "bourse", "run", fixture.name], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=240,
                          check=False)
    assert done.returncode == 0, \
        f"{done.stdout}\n{done.stderr}\n{lan.exchange.cluster.logs()}"
    for rank in (0, 1):
        assert f"[rank {rank}] SKYPILOT_NODE_RANK is set to {rank}" in done.stdout
        assert f"[rank {rank}] TEST_VAR is set to test" in done.stdout
        assert f"[rank {rank}] ~/sky_workdir/sky exists" in done.stdout
        assert f"[rank {rank}] Worker IP: 10.204." in done.stdout
    assert "note (skypilot): run: ~/sky_workdir is a link" in done.stderr
    assert "Worker IP: 10.204." in done.stdout


def test_a_gang_larger_than_its_network_waits_holding_nothing_until_a_node_joins(
        lan: Lan) -> None:
    if len(lan.agents) == lan.bridge.count:
        pytest.skip("the last node has joined already")  # never: only this test adds it
    job = lan.submit(["sh", "-c", "echo member $NODE_RANK of $NNODES"], 4)
    # the three present nodes may still be finishing the module's earlier gangs: wait until
    # all three are free, then the reason must name the fourth that is missing
    waiting = lan.exchange.wait_job(job, lambda j: "lan: 3" in (j.pending_reason or ""), 30,
                                    "to say three nodes fit")
    assert "needs 4 nodes of one network" in (waiting.pending_reason or "")
    assert waiting.attempts == []  # it holds no node while it waits
    lan.join_last()
    final = lan.exchange.wait_ended(job, 60)
    assert final.state == "SUCCEEDED", final
    lines = sorted(line for a in lan.agents for line in a.stdout(job, 1).decode().splitlines())
    assert lines == [f"member {r} of 4" for r in range(4)]


def test_two_gangs_wanting_the_same_nodes_run_one_after_the_other(lan: Lan) -> None:
    """Three-node gangs on three or four nodes: one runs, the other waits whole; neither
    deadlocks, neither is retried."""
    jobs = [lan.submit(["sh", "-c", "sleep 1"], 3) for _ in range(2)]
    finals = [lan.exchange.wait_ended(job, 90) for job in jobs]
    assert [(f.state, f.attempt) for f in finals] == [("SUCCEEDED", 1)] * 2, finals
    spans = sorted((min(a.started_at or 0 for a in f.attempts),
                    max(a.ended_at or 0 for a in f.attempts)) for f in finals)
    assert spans[0][1] <= spans[1][0]  # never both at once: no node held by two gangs
