"""Placement gives each attempt devices of its own: whole GPUs by address, MIG slices as GPUs
of their own (from a verified report built from real captures), and says why a job waits."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Exchange, Live, capabilities, open_exchange, serve
from sqlalchemy import update

from bourse.agent.probe import parse_csv, parse_table
from bourse.agent.probe.gpus import merge_table
from bourse.protocol.agent import ProbeReportMessage
from bourse.protocol.common import HostInfo, ProbeReport
from bourse.server.db.schema import Attempt

pytestmark = pytest.mark.anyio
Factory = Callable[..., Any]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
ZERO = "GPU-00000000-0000-0000-0000-000000000000"  # the H200's UUID, masked in the capture


async def _submit(exchange: Exchange, **compute: Any) -> str:
    """A job, one second after the last (placement takes the oldest first)."""
    job_id: str = (await exchange.submit(compute=compute))["id"]
    exchange.clock.advance(1)
    return job_id


async def _starts(agent: FakeAgent) -> dict[str, list[str] | None]:
    """job id -> the devices its StartJob gave it, for every start received so far."""
    await agent.barrier()
    return {s["job_id"]: s.get("gpus") for s in agent.received("start_job")}


async def test_each_attempt_gets_its_own_gpus_and_a_cpu_job_none(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    node: FakeAgent = await agent_factory("two-gpus", cpus=8, gpus=2)
    first = await _submit(exchange, gpu="a100-80gb")
    second = await _submit(exchange, gpu="a100-80gb")
    cpu = await _submit(exchange, cpus=1)
    third = await _submit(exchange, gpu="a100-80gb")
    assert (await exchange.tick()).placed == 3
    # the harness's GPUs carry no UUID: they are addressed by index
    assert await _starts(node) == {first: ["0"], second: ["1"], cpu: []}
    assert (await exchange.attempt_row(first, 1)).resources["gpu_uuids"] == ["0"]
    waiting = await exchange.job(third)
    assert "has 0 GPUs free, needs 1" in waiting["pending_reason"]
    await node.run_job(first, 1)  # its GPU is free again, and the waiting job gets it
    await exchange.tick()
    assert (await _starts(node))[third] == ["0"]


async def test_a_job_asking_for_more_gpus_than_are_free_waits_and_says_why(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    node: FakeAgent = await agent_factory("two-gpus", cpus=8, gpus=2)
    one = await _submit(exchange, gpu="a100-80gb")
    await exchange.tick()
    two = await _submit(exchange, gpu="a100-80gb:2")
    assert (await exchange.tick()).placed == 0
    assert "has 1 GPUs free, needs 2" in (await exchange.job(two))["pending_reason"]
    await node.run_job(one, 1)
    await exchange.tick()
    assert (await _starts(node))[two] == ["0", "1"]


async def test_an_attempt_placed_before_devices_were_named_still_holds_its_gpus(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    node: FakeAgent = await agent_factory("two-gpus", cpus=8, gpus=2)
    old = await _submit(exchange, gpu="a100-80gb")
    await exchange.tick()
    async with exchange.state.db.write() as session:  # as an older coordinator wrote it
        await session.execute(update(Attempt).where(Attempt.job_id == old).values(
            resources={"cpus": 1.0, "memory_gib": 0.0, "gpus": 1.0}))
    new = await _submit(exchange, gpu="a100-80gb")
    late = await _submit(exchange, gpu="a100-80gb")
    assert (await exchange.tick()).placed == 1
    assert (await _starts(node))[new] == ["1"]  # the old attempt is taken to hold the first
    assert (await exchange.job(late))["state"] == "PENDING"


def h200_mig_report() -> ProbeReport:
    """What the probe reads from the two real captures of one H200 on driver 590: the CSV
    query (its UUID, masked by the capture script) and the table with MIG on (5 MIG devices,
    no UUIDs of their own)."""
    reading = merge_table(parse_csv((FIXTURES / "csv-h200-drv590.csv").read_text()),
                          parse_table((FIXTURES / "table-h200-mig-drv590.txt").read_text()))
    return ProbeReport(fingerprint="f1", source="nvidia-smi-csv", driver=reading.driver,
                       cuda=reading.cuda, gpus=list(reading.gpus),
                       host=HostInfo(cpu_logical_cores=16, memory_mib=65536))


@pytest.fixture
async def mig_node(tmp_path: Path, database_url: str) -> AsyncIterator[tuple[Exchange, FakeAgent]]:
    """A strict coordinator (verified nodes only) and a node whose verified report shows the
    H200 in MIG mode (its hello claims nothing)."""
    async with open_exchange(tmp_path, database_url, allow_unverified=False) as exchange, \
            serve(exchange) as live:
        node_id, credential = await exchange.enroll("h200-mig")
        agent = FakeAgent(live.ws_url, node_id, credential, capabilities(cpus=16, memory_gib=64),
                          name="h200-mig")
        await agent.connect()
        try:
            await agent.send(ProbeReportMessage(report=h200_mig_report()))
            assert (await exchange.node_row(node_id)).verification_status in ("pass", "warn")
            yield exchange, agent
        finally:
            await agent.close()


async def test_mig_slices_are_offered_and_given_one_per_job(
        mig_node: tuple[Exchange, FakeAgent]) -> None:
    exchange, agent = mig_node
    offers = (await exchange.client.post("/api/v1/offers", json={
        "compute": {"gpu": {"memory": {"min": 1}}}})).json()["offers"]
    assert sorted((o["gpu"], o["gpu_slice"], o["gpu_count"], o["gpu_memory_mib"])
                  for o in offers) == [("h200", "16GB", 2, 16384), ("h200", "32GB", 1, 33280),
                                       ("h200", "35GB", 2, 35712)]
    named = await _submit(exchange, gpu="h200")
    whole = await _submit(exchange, gpu="100GB+")
    small = [await _submit(exchange, gpu="16GB+") for _ in range(2)]
    assert (await exchange.tick()).placed == 2
    starts = await _starts(agent)
    assert starts == {small[0]: [f"MIG-{ZERO}/9/0"], small[1]: [f"MIG-{ZERO}/10/0"]}
    # a node of MIG slices only: whole GPUs can never be had there, and it is the only node
    reason = (await exchange.job(named))["reason"]
    assert "has MIG slices 16GB of h200, not whole GPUs" in reason, reason
    assert "GPU memory 16GB, needs 100GB+" in (await exchange.job(whole))["reason"]
