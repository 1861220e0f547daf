"""A launched spot instance boots from its user data (tests/clouds/boot.py): in a network
namespace of its own that drops every inbound connection, with the GPUs of a real 8x H100
capture, the token from `bourse nodes enroll`. Its agent enrols, is verified with those GPUs,
watches the metadata service's notice and runs a job; the token shows nowhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from boot import Machine, boot

import bourse
from bourse.clouds.userdata import user_data
from bourse.protocol.api import NodeView
from bourse.protocol.common import JobSpec

TESTS = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(TESTS / "e2e"), str(TESTS / "agent")]
from harness import Cluster, Exchange, wait_for  # noqa: E402
from imds_stub import ImdsStub  # noqa: E402
from netns import Netns, require_tools  # noqa: E402

T = TypeVar("T")

pytestmark = pytest.mark.slow
H100X8 = "txt-h100-80gb-hbm3-x8-drv535.txt"
VERIFY_TIMEOUT_S = 120.0  # a cold agent start, its probe and checks, on a busy 2-core machine


@dataclass
class Launched:
    exchange: Exchange
    machine: Machine
    token: str
    stub: ImdsStub

    def node(self) -> NodeView | None:
        return next((n for n in self.exchange.client.nodes()
                     if n.id == self.machine.node_id), None)

    def wait_for(self, what: str, check: Callable[[], T]) -> T:
        return wait_for(check, VERIFY_TIMEOUT_S, what,
                        lambda: f"{self.exchange.cluster.logs()}\n{self.machine.tail()}")


def enrol_token(exchange: Exchange) -> str:
    """A token made as an operator makes one: `bourse nodes enroll`."""
    env = {**os.environ, "BOURSE_URL": exchange.coordinator.url,
           "BOURSE_TOKEN": exchange.coordinator.token}
    done = subprocess.run([sys.executable, "-m", "bourse", "nodes", "enroll", "--name",
                           "launch-1", "--expires", "0.5", "--json"], env=env, check=True,
                          capture_output=True, text=True, timeout=60)
    return str(json.loads(done.stdout)["token"])


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launched]:
    require_tools()
    root = tmp_path_factory.mktemp("launch")
    cluster = Cluster(root)
    ns = Netns()
    cluster.closers.append(ns.delete)
    try:
        ns.create()
        ns.drop_inbound()  # as a cloud instance without a public port: the agent dials out
        exchange = Exchange(cluster, 1.0, host=ns.host_ip).start()
        stub = ImdsStub(host=ns.host_ip)  # the instance's metadata service
        cluster.closers.append(stub.close)
        token = enrol_token(exchange)
        script = user_data(
            server_url=exchange.coordinator.url, enrol_token=token, node_name="aws-i-0abc",
            version=bourse.__version__, provider="aws", region="us-east-1", zone="use1-az1",
            instance_type="p5.48xlarge", spot=True, spot_price=31.5, price=31.5,
            metadata_url=stub.url, gpus="h100-80gb:8")
        machine = boot(script, H100X8, root / "instance", prefix=ns.prefix)
        cluster.closers.append(machine.stop)
        yield Launched(exchange, machine, token, stub)
    finally:
        cluster.close()


def test_the_instance_enrols_is_verified_with_its_gpus_and_runs_a_job(
        launched: Launched) -> None:
    node = launched.wait_for("the launched node to be verified", lambda: next(
        (n for n in [launched.node()] if n is not None and n.connected
         and n.verification_status in ("pass", "warn")), None))
    assert node.capabilities is not None
    caps = node.capabilities
    assert node.name == "aws-i-0abc"
    assert [g.model for g in caps.gpus] == ["h100-80gb"] * 8
    assert node.verification is not None
    assert {c.name: c.status for c in node.verification.checks}["declared.gpus"] == "pass"
    assert (caps.provider, caps.region, caps.interruptible, caps.spot_price) == (
        "aws", "us-east-1", True, 31.5)
    assert f"watching the spot interruption notice at {launched.stub.url}" in \
        launched.machine.agent_log()
    launched.wait_for("the agent to read the metadata service",
                      lambda: launched.stub.gets > 0)
    assert launched.stub.refused == 0  # every read carried its IMDSv2 token

    client = launched.exchange.client
    job = client.submit(JobSpec(command=["sh", "-c", "echo hello from $(hostname)"],
                                compute={"cpus": 1, "spot": "only"}, max_retries=0))
    done = launched.exchange.wait_ended(job.id, timeout=60)
    assert done.state == "SUCCEEDED", done.reason
    assert [a.node_id for a in done.attempts] == [node.id]


def test_the_token_is_in_no_process_list_and_no_log(launched: Launched) -> None:
    machine, token = launched.machine, launched.token
    launched.wait_for("the agent to enrol", lambda: machine.node_id)
    listing = subprocess.run(["ps", "-eww", "-o", "pid=,args="], capture_output=True,
                             text=True, check=True).stdout
    agent = next(line for line in listing.splitlines()
                 if line.split(None, 1)[0] == str(machine.agent_pid))
    assert "bourse agent --token-file" in agent  # it is this agent's line
    assert token not in listing
    assert token.encode() not in Path(f"/proc/{machine.agent_pid}/environ").read_bytes()
    assert token not in machine.agent_log() and machine.agent_log()
    assert token not in machine.boot_log.read_text()
    token_file = machine.root / "etc" / "bourse" / "enrol-token"
    assert oct(token_file.stat().st_mode & 0o777) == "0o600"
