"""A node's owner sets its price at enrolment, and drains it: through real routes, a real
database and fake agents (what `bourse fleets add` and `bourse fleets remove` stand on)."""

from __future__ import annotations

import pytest
from fake_agent import FakeAgent
from server_harness import Live, capabilities, place_job

from bourse import __version__

pytestmark = pytest.mark.anyio


async def _enrol(live: Live, name: str, **body: object) -> FakeAgent:
    made = await live.exchange.client.post("/api/v1/enrollments", json={"name": name, **body})
    assert made.status_code == 201, made.text
    assert made.json()["agent_version"] == __version__
    enrolled = await live.exchange.client.post(
        "/api/v1/agent/enroll", json={"name": name},
        headers={"Authorization": f"Bearer {made.json()['token']}"})
    assert enrolled.status_code == 201, enrolled.text
    agent = FakeAgent(live.ws_url, enrolled.json()["node_id"], enrolled.json()["credential"],
                      capabilities(cpus=4), name=name)
    await agent.connect()
    return agent


async def test_the_price_set_at_enrolment_is_the_nodes(live: Live) -> None:
    agent = await _enrol(live, "rack-1", price_per_hour=1.2)
    try:
        node = await live.exchange.node_row(agent.node_id)
        assert node.price == pytest.approx(1.2)
        job_id, number = await place_job(live.exchange, agent, compute={"cpus": 2})
        attempt = await live.exchange.attempt_row(job_id, number)
        assert attempt.price == pytest.approx(0.6)  # half the node's cpus
    finally:
        await agent.close()


@pytest.mark.parametrize("price", [0, -1, "1", True, 20_000])
async def test_a_bad_enrolment_price_is_refused(live: Live, price: object) -> None:
    made = await live.exchange.client.post("/api/v1/enrollments",
                                           json={"name": "x", "price_per_hour": price})
    assert made.status_code == 422, made.text


async def test_a_drained_node_takes_no_new_work_and_its_running_work_finishes(
        live: Live) -> None:
    exchange = live.exchange
    agent = await _enrol(live, "rack-2", price_per_hour=0.5)
    try:
        job_id, number = await place_job(exchange, agent, compute={"cpus": 1})
        await agent.event(job_id, number, "started", pid=1)
        drained = await exchange.client.post(f"/api/v1/nodes/{agent.node_id}/drain")
        assert drained.status_code == 200, drained.text
        assert drained.json()["running"] == 1
        first = drained.json()["drained_at"]
        waiting = await exchange.submit(compute={"cpus": 1})
        await exchange.tick()
        assert (await exchange.job(waiting["id"]))["state"] == "PENDING"
        await agent.event(job_id, number, "exited", exit_code=0)
        assert (await exchange.job(job_id))["state"] == "SUCCEEDED"
        again = await exchange.client.post(f"/api/v1/nodes/{agent.node_id}/drain")
        assert again.json() == {"node_id": agent.node_id, "drained_at": first, "running": 0}
        await agent.close()
        await agent.connect()  # a hello does not undo the drain
        await exchange.tick()
        assert (await exchange.job(waiting["id"]))["state"] == "PENDING"
        shown = await exchange.client.get(f"/api/v1/nodes/{agent.node_id}")
        assert shown.json()["drained_at"] == first
    finally:
        await agent.close()


async def test_drain_needs_a_provider_of_the_nodes_project(live: Live) -> None:
    exchange = live.exchange
    agent = await _enrol(live, "rack-3")
    try:
        member = await exchange.project_token("other", role="member")
        refused = await exchange.client.post(f"/api/v1/nodes/{agent.node_id}/drain",
                                             headers={"Authorization": f"Bearer {member}"})
        assert refused.status_code == 403, refused.text
        provider = await exchange.project_token("other", role="provider")
        hidden = await exchange.client.post(f"/api/v1/nodes/{agent.node_id}/drain",
                                            headers={"Authorization": f"Bearer {provider}"})
        assert hidden.status_code == 404, hidden.text
        missing = await exchange.client.post("/api/v1/nodes/n-nope/drain")
        assert missing.status_code == 404
    finally:
        await agent.close()
