"""The spot notice as a cloud gives it, with real processes: a coordinator with its embedded
SeaweedFS and two interruptible agents, each watching its own machine's metadata service (a
local IMDSv2, tests/agent/imds_stub.py). The notice on the running job's machine makes the
Lightning job checkpoint, its attempt end PREEMPTED, and the job resume from that checkpoint
on the other node — nobody calls `bourse nodes reclaim`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from dataplane_harness import start, stop
from harness import Agent, Exchange
from imds_stub import ImdsStub
from spot_harness import running_on, spot_agent, stdout_has, submit

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*LeafSpec.*")]

EPOCHS, STEP_SLEEP = 6, "0.02"
NOTICE_S = 30  # EC2 gives two minutes; the job needs less to save


@dataclass
class Machines:
    exchange: Exchange
    agents: dict[str, Agent]
    metadata: dict[str, ImdsStub]  # agent name -> its machine's metadata service

    def by_node(self, node_id: str | None) -> tuple[Agent, Agent]:
        """(the agent with this node id, the other one)."""
        a, b = self.agents.values()
        return (a, b) if a.node_id == node_id else (b, a)


@pytest.fixture(scope="module")
def machines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Machines]:
    data = start(tmp_path_factory.mktemp("notice"))
    exchange = data.exchange
    data.agent.kill9()  # the harness's on-demand agent is not part of this proof
    metadata = {name: ImdsStub() for name in ("spot-a", "spot-b")}
    try:
        agents = {name: spot_agent(exchange, name, region, args=[
            "--spot-notice", "imds", "--metadata-url", metadata[name].url,
            "--spot-notice-interval", "0.2"])
            for name, region in (("spot-a", "eu-west"), ("spot-b", "us-east"))}
        yield Machines(exchange, agents, metadata)
    finally:
        stop(exchange)
        for stub in metadata.values():
            stub.close()


def test_a_metadata_notice_checkpoints_preempts_and_resumes_elsewhere(
        machines: Machines) -> None:
    exchange = machines.exchange
    job = submit(exchange, "digits_job.py", str(EPOCHS), STEP_SLEEP)
    first = exchange.wait_job(job.id, lambda j: j.state == "RUNNING", 60, "to run")
    a, b = machines.by_node(first.node_id)
    exchange.wait_for(lambda: stdout_has(a, job.id, 1, "epoch 2 "), 60, "two epochs")
    gets = machines.metadata[a.name].gets

    goes_at = machines.metadata[a.name].notice("terminate", time.time() + NOTICE_S)
    running_on(exchange, job.id, b, 2)
    done = exchange.wait_ended(job.id, timeout=90)

    assert gets > 0 and machines.metadata[a.name].refused == 0  # watched, with its token
    assert done.state == "SUCCEEDED", done.reason
    first_attempt, second = done.attempts
    assert (first_attempt.state, first_attempt.node_id) == ("PREEMPTED", a.node_id)
    assert first_attempt.exit_code == 143  # Lightning stopped on SIGTERM, after saving
    assert first_attempt.preempted_at is not None and first_attempt.checkpoint_at is not None
    assert first_attempt.checkpoint_at >= first_attempt.preempted_at  # saved on the notice
    assert first_attempt.lost_work_s == 0.0
    assert first_attempt.ended_at is not None and first_attempt.ended_at < goes_at
    assert second.node_id == b.node_id and second.state == "SUCCEEDED"
    assert "resume=1 from /" in b.stdout(job.id, 2).decode()  # from the notice's checkpoint
    node = next(n for n in exchange.client.nodes() if n.id == a.node_id)
    assert node.state == "reclaimed"
    notes = [e.message for e in exchange.client.events(job.id) if e.kind == "preemption"]
    assert len(notes) == 1 and "spot interruption notice: terminate at" in notes[0]
