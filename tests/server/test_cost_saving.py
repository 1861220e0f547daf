"""``/api/v1/cost`` and a job's on-demand figures: an on-demand attempt is its own on-demand
price (no saving), and only spot attempts are compared with on-demand prices."""

from __future__ import annotations

import pytest
from fake_agent import FakeAgent
from server_harness import Exchange, Live, capabilities, place_job

from bourse.core.cost import saving

pytestmark = pytest.mark.anyio


async def _ran(exchange: Exchange, agent: FakeAgent, seconds: float,
               **compute: object) -> str:
    """A job placed on ``agent``, run for ``seconds`` and ended with exit 0."""
    job_id, number = await place_job(exchange, agent, compute={"cpus": 1, **compute})
    await agent.event(job_id, number, "started", pid=3, time=exchange.clock())
    exchange.clock.advance(seconds)
    await agent.event(job_id, number, "exited", exit_code=0)
    return job_id


async def _connected(live: Live, name: str, spot_price: float | None = None) -> FakeAgent:
    node_id, credential = await live.exchange.enroll(name)
    caps = capabilities(cpus=2).model_copy(update={"interruptible": spot_price is not None,
                                                   "spot_price": spot_price})
    agent = FakeAgent(live.ws_url, node_id, credential, caps, name=name)
    await agent.connect()
    return agent


async def test_part_of_an_on_demand_node_saves_nothing(live: Live) -> None:
    """A one-CPU job on a two-CPU on-demand node pays half the node's price: that is its
    on-demand price, not half of a saving."""
    exchange = live.exchange
    agent = await _connected(live, "cpu-box")
    job_id = await _ran(exchange, agent, 3600)
    detail = await exchange.job(job_id)
    [attempt] = detail["attempts"]
    assert attempt["list_price_per_hour"] == attempt["price_per_hour"]
    assert detail["on_demand_cost"] == pytest.approx(detail["cost"])
    [row] = (await exchange.client.get("/api/v1/cost", params={"by": "job"})).json()["rows"]
    assert row["on_demand_cost"] == pytest.approx(row["cost"])
    assert (row["spot_cost"], row["spot_on_demand_cost"]) == (0.0, None)
    assert saving(row["spot_cost"], row["spot_on_demand_cost"]) is None
    await agent.close()


async def test_only_spot_attempts_are_compared_with_on_demand(live: Live) -> None:
    exchange = live.exchange
    on_demand = await _connected(live, "cpu-box")
    await _ran(exchange, on_demand, 3600)
    await on_demand.close()
    spot = await _connected(live, "spot-box", spot_price=0.02)
    spot_job = await _ran(exchange, spot, 3600, spot="only")
    [attempt] = (await exchange.job(spot_job))["attempts"]
    assert attempt["spot"] is True and attempt["price_per_hour"] == pytest.approx(0.01)
    total = (await exchange.client.get("/api/v1/cost", params={"by": "day"})).json()["total"]
    assert total["spot_cost"] == pytest.approx(0.01)
    assert total["spot_on_demand_cost"] == pytest.approx(attempt["list_price_per_hour"])
    assert total["cost"] > total["spot_cost"]  # the on-demand job counts in the cost only
    await spot.close()
