"""Region awareness: a job with inputs prefers nodes in the region of the exchange's store
over others of equal price (the ranking itself, cheaper first, is tested in tests/core), and
its placement says when it went cross-region. Nodes say where they are with
``bourse agent --region``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fake_agent import FakeAgent
from server_harness import Live, capabilities, open_exchange, serve

from bourse.server.config import StoreConfig
from bourse.server.dataplane import DataPlane
from bourse.storage import MemoryIssuer, MemoryStore, StoreSettings

pytestmark = pytest.mark.anyio
DATA = {"inputs": {"data": "s3://datasets/digits/"}}


@pytest.fixture
async def live(database_url: str, tmp_path: Path) -> AsyncIterator[Live]:
    plane = DataPlane(StoreSettings(endpoint="http://store.test:8333", region="eu-west-1"),
                      "bourse", MemoryIssuer(), store=MemoryStore("bourse"))
    store = StoreConfig(kind="external", endpoint="http://store.test:8333", region="eu-west-1")
    async with open_exchange(tmp_path, database_url, dataplane=plane, store=store) as exchange, \
            serve(exchange) as served:
        yield served


async def _node(live: Live, name: str, region: str | None) -> FakeAgent:
    node_id, credential = await live.exchange.enroll(name)
    caps = capabilities(cpus=1).model_copy(update={"region": region})
    agent = FakeAgent(live.ws_url, node_id, credential, caps, name=name)
    await agent.connect()
    return agent


async def _placed_on(live: Live, agents: list[FakeAgent], **spec: object) -> tuple[str, str]:
    job = await live.exchange.submit(**spec)
    await live.exchange.tick()
    detail = await live.exchange.job(job["id"])
    [attempt] = detail["attempts"]
    name = next(a.name for a in agents if a.node_id == attempt["node_id"])
    return name, attempt["placement"]


async def test_a_job_with_inputs_goes_to_the_node_near_its_data(live: Live) -> None:
    agents = [await _node(live, "us-box", "us-east-1"), await _node(live, "eu-box", "eu-west-1")]
    try:
        name, placement = await _placed_on(live, agents, **DATA)
        assert name == "eu-box"
        assert "cross-region" not in placement
    finally:
        for agent in agents:
            await agent.close()


async def test_a_cross_region_placement_says_so(live: Live) -> None:
    agents = [await _node(live, "us-box", "us-east-1")]
    try:
        name, placement = await _placed_on(live, agents, **DATA)
        assert name == "us-box"
        assert placement.endswith(
            "; cross-region: the data is in eu-west-1, the node in us-east-1")
    finally:
        await agents[0].close()


async def test_a_job_without_inputs_ignores_regions(live: Live) -> None:
    agents = [await _node(live, "a-us", "us-east-1"), await _node(live, "b-eu", "eu-west-1")]
    try:
        _, placement = await _placed_on(live, agents)
        assert "cross-region" not in placement
    finally:
        for agent in agents:
            await agent.close()
