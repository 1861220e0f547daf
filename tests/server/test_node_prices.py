"""What one node costs: the same price per CPU and per GPU in every attempt, however busy the
node was when the attempt was placed, and an on-demand attempt's list price is its own price
(no saving to claim); a spot attempt's is the same share of the node's on-demand price."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Exchange, Live, capabilities, place_job

from bourse.market.pricing import list_price

pytestmark = pytest.mark.anyio
Make = Callable[..., Any]


async def _prices(exchange: Exchange, agent: FakeAgent, compute: dict[str, Any],
                  times: int) -> list[tuple[float | None, float | None]]:
    """(price, list price) of ``times`` attempts placed one after the other on ``agent``, each
    while the ones before it still run."""
    found = []
    for _ in range(times):
        job_id, number = await place_job(exchange, agent, compute=compute)
        attempt = await exchange.attempt_row(job_id, number)
        found.append((attempt.price, attempt.list_price))
    return found


async def test_a_cpu_node_costs_the_same_per_cpu_however_busy(
        live: Live, agent_factory: Make) -> None:
    node: FakeAgent = await agent_factory("cpu-box", cpus=4)
    whole = list_price(4, None, 0)
    prices = await _prices(live.exchange, node, {"cpus": 1}, 3)
    assert prices == [(pytest.approx(whole / 4), pytest.approx(whole / 4))] * 3


async def test_a_gpu_node_costs_the_same_per_gpu_however_busy(
        live: Live, agent_factory: Make) -> None:
    node: FakeAgent = await agent_factory("two-gpus", cpus=8, gpus=2)
    whole = list_price(8, "a100-80gb", 2)
    prices = await _prices(live.exchange, node, {"gpu": "a100-80gb", "cpus": 1}, 2)
    assert prices == [(pytest.approx(whole / 2), pytest.approx(whole / 2))] * 2


async def test_a_spot_attempt_is_compared_with_the_same_share_at_on_demand(
        live: Live) -> None:
    node_id, credential = await live.exchange.enroll("spot-box")
    caps = capabilities(cpus=4).model_copy(update={"interruptible": True, "spot_price": 0.08})
    node = FakeAgent(live.ws_url, node_id, credential, caps, name="spot-box")
    await node.connect()
    prices = await _prices(live.exchange, node, {"cpus": 1, "spot": "only"}, 2)
    assert prices == [(pytest.approx(0.02), pytest.approx(list_price(4, None, 0) / 4))] * 2
    await node.close()
