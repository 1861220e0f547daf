"""Placement only on verified nodes: an agent's probe report, judged by the coordinator, opens
a node to work (the other tests run the coordinator with ``allow_unverified``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import A100, NOTHING_CONNECTED, Exchange, capabilities, open_exchange, serve

from bourse.protocol.agent import ProbeReportMessage
from bourse.protocol.common import HostInfo, ProbeReport

HOST = HostInfo(cpu_logical_cores=8, memory_mib=32768)


def report(fingerprint: str, **fields: Any) -> ProbeReport:
    """A minimal report that measured something (a host with CPUs and memory)."""
    return ProbeReport(fingerprint=fingerprint, host=HOST, **fields)

pytestmark = pytest.mark.anyio
Factory = Callable[..., Any]


@pytest.fixture
async def strict(tmp_path: Path, database_url: str) -> AsyncIterator[tuple[Exchange, str]]:
    """A coordinator that places work on verified nodes only, served on a loopback port."""
    async with open_exchange(tmp_path, database_url, allow_unverified=False) as exchange, \
            serve(exchange) as live:
        yield exchange, live.ws_url


async def _agent(exchange: Exchange, url: str, **caps: Any) -> FakeAgent:
    node_id, credential = await exchange.enroll("box")
    agent = FakeAgent(url, node_id, credential, capabilities(**caps), name="box")
    await agent.connect()
    return agent


async def test_an_unverified_node_gets_no_work_until_its_report_passes(
        strict: tuple[Exchange, str]) -> None:
    exchange, url = strict
    agent = await _agent(exchange, url)
    try:
        job = await exchange.submit()
        assert (await exchange.tick()).placed == 0
        assert NOTHING_CONNECTED.match((await exchange.job(job["id"]))["pending_reason"])
        assert (await exchange.client.post("/api/v1/offers", json={})).json()["offers"] == []
        await agent.send(ProbeReportMessage(report=report("f1", source="none",
                                                          probed_at=exchange.clock())))
        node = await exchange.node_row(agent.node_id)
        assert (node.verification_status, node.verified_at) == ("pass", exchange.clock())
        await exchange.tick()
        await agent.expect("start_job", job_id=job["id"])
    finally:
        await agent.close()


async def test_a_changed_fingerprint_sends_the_node_back_to_unverified(
        strict: tuple[Exchange, str]) -> None:
    exchange, url = strict
    agent = await _agent(exchange, url)
    try:
        await agent.send(ProbeReportMessage(report=report("f1")))
        await agent.close()
        agent.capabilities = capabilities().model_copy(update={"fingerprint": "f2"})
        await agent.connect()
        assert (await exchange.node_row(agent.node_id)).verification_status == "unverified"
        job = await exchange.submit()
        assert (await exchange.tick()).placed == 0
        assert (await exchange.job(job["id"]))["state"] == "PENDING"
    finally:
        await agent.close()


async def test_placement_trusts_what_was_verified_not_what_the_hello_claims(
        strict: tuple[Exchange, str]) -> None:
    exchange, url = strict
    agent = await _agent(exchange, url, gpus=2)  # the hello claims two A100s
    try:
        await agent.send(ProbeReportMessage(report=report("f1", source="none", gpus=[])))
        assert (await exchange.node_row(agent.node_id)).verification_status == "pass"
        job = await exchange.submit(compute={"gpu": A100.model})
        await exchange.tick()
        await agent.barrier()
        assert agent.received("start_job") == [], "a GPU job went to a node with no GPU"
        detail = await exchange.job(job["id"])  # and no node could ever run it: said at once
        assert detail["state"] == "FAILED"
        assert detail["reason"].startswith("no node on this exchange can ever run it")
    finally:
        await agent.close()


async def test_an_empty_report_does_not_verify_a_node(strict: tuple[Exchange, str]) -> None:
    exchange, url = strict
    agent = await _agent(exchange, url)
    try:
        await agent.send(ProbeReportMessage(report=ProbeReport(fingerprint="f1")))
        assert (await exchange.node_row(agent.node_id)).verification_status == "fail"
    finally:
        await agent.close()
