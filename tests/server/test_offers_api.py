"""``POST /api/v1/offers``: the matcher over live nodes' free capacity, with explanations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Exchange, Live, place_job

pytestmark = pytest.mark.anyio
Factory = Callable[..., Any]


async def _offers(exchange: Exchange, **query: Any) -> dict[str, Any]:
    response = await exchange.client.post("/api/v1/offers", json=query)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_without_nodes_there_are_no_offers_and_an_explanation(exchange: Exchange) -> None:
    await exchange.enroll("enrolled-but-offline")
    found = await _offers(exchange, compute={"gpu": "a100-80gb"})
    assert found["offers"] == []
    assert found["explanation"][0].startswith("0 offers considered")
    assert "0 matched" in found["explanation"]


async def test_connected_nodes_are_offered_cheapest_first(live: Live,
                                                          agent_factory: Factory) -> None:
    exchange = live.exchange
    cpu: FakeAgent = await agent_factory("cpu-box", cpus=4, memory_gib=16)
    gpu: FakeAgent = await agent_factory("gpu-box", cpus=16, memory_gib=128, gpus=2)
    found = await _offers(exchange)
    assert found["explanation"] is None  # only asked for, or when nothing matches
    assert [o["node_id"] for o in found["offers"]] == [cpu.node_id, gpu.node_id]
    first = found["offers"][0]
    assert (first["provider"], first["instance_type"], first["gpu"]) == (
        "node", "cpu-box", None)
    assert (first["cpus"], first["memory_gib"], first["spot"]) == (4, 16, False)
    assert first["price_per_hour"] > 0
    gpus = await _offers(exchange, compute={"gpu": "a100-80gb:2"}, explain=True)
    assert [(o["node_id"], o["gpu"], o["gpu_count"]) for o in gpus["offers"]] == [
        (gpu.node_id, "a100-80gb", 2)]
    assert any("has no GPU" in line for line in gpus["explanation"])
    limited = await _offers(exchange, limit=1)
    assert len(limited["offers"]) == 1


async def test_when_nothing_matches_the_explanation_says_why(
        live: Live, agent_factory: Factory) -> None:
    agent: FakeAgent = await agent_factory("small", cpus=2)
    found = await _offers(live.exchange, compute={"gpu": "h100", "cpus": 64})
    assert found["offers"] == []
    lines = found["explanation"]
    assert lines[0].startswith("1 offers considered")
    assert any(agent.node_id in line and "has no GPU" in line for line in lines)


async def test_offers_show_free_capacity_only(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory(cpus=2)
    await place_job(exchange, agent, compute={"cpus": 1})
    [offer] = (await _offers(exchange))["offers"]
    assert offer["cpus"] == 1
    await place_job(exchange, agent, compute={"cpus": 1})
    full = await _offers(exchange)
    assert full["offers"] == []
    assert full["explanation"][0].startswith("0 offers considered")
