"""Gangs across real network namespaces: a coordinator on the host, two agents each in a
namespace of its own on one bridge (bridge.py), and `bourse run --nodes 2`-style jobs: a
Lightning DDP script and a torchrun script, unchanged, train across both nodes and end with
identical parameters on every rank."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge import Bridge, require_tools
from harness import Cluster, Exchange

from bourse.protocol.common import JobSpec

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*LeafSpec.*")]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
TORCHRUN = ("exec python -m torch.distributed.run --nnodes $NNODES --node-rank $NODE_RANK "
            "--nproc-per-node 1 --master-addr $MASTER_ADDR --master-port $MASTER_PORT "
            f"{SCRIPTS / 'torchrun_ddp.py'}")


class Lan:
    def __init__(self, bridge: Bridge, exchange: Exchange) -> None:
        self.bridge, self.exchange = bridge, exchange
        self.agents = [exchange.agent(f"ns{i}", cpus=1, prefix=bridge.prefix(i),
                                      args=["--network", "lan"]) for i in range(bridge.count)]

    def run(self, command: list[str]) -> dict[int, str]:
        """The job's stdout on each node, by the node's index; what the exchange has of it
        must hold both members' lines."""
        job = self.exchange.client.submit(JobSpec.model_validate({
            "command": command, "compute": {"num_nodes": 2, "cpus": 1}}))
        final = self.exchange.wait_ended(job.id, 180)
        out = {i: a.stdout(job.id, final.attempt).decode() for i, a in enumerate(self.agents)}
        assert final.state == "SUCCEEDED", (final, out, self.exchange.cluster.logs())
        assert final.attempt == 1
        stored = b"".join(base64.b64decode(c.data) for c in
                          self.exchange.client.iter_logs(job.id)).decode()
        assert sorted(stored.count(f"rank={r} ") for r in (0, 1)) == [1, 1], stored
        return out


@pytest.fixture(scope="module")
def lan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lan]:
    require_tools()
    bridge = Bridge(2)
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
    for i, text in out.items():
        assert f"GLOO_SOCKET_IFNAME={lan.bridge.ifname(i)}" in text
        assert "MASTER_ADDR=10.204." in text  # rank 0's address on the bridge, not loopback


def test_a_torchrun_script_trains_across_two_namespaces(lan: Lan) -> None:
    lines = checksums(lan.run(["sh", "-c", TORCHRUN]))
    assert [line.split()[1:3] for line in lines] == [["rank=0", "world=2"],
                                                     ["rank=1", "world=2"]]
    assert len({line.split()[-1] for line in lines}) == 1
