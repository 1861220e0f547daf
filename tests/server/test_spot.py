"""Spot on the coordinator, through real routes, a real database and fake agents: spot
policies against interruptible nodes, reclaims (permissions, validation, the preempt
message), PREEMPTED attempts resumed elsewhere, and the retry policy's backoff."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Live, capabilities, place_job

pytestmark = pytest.mark.anyio
Make = Callable[..., Any]


@pytest.fixture
async def node(live: Live) -> AsyncIterator[Make]:
    """``await node(name, spot_price=None|float, region=...)``: a connected fake agent."""
    made: list[FakeAgent] = []

    async def make(name: str, spot_price: float | None = None, region: str = "eu") -> FakeAgent:
        node_id, credential = await live.exchange.enroll(name)
        caps = capabilities(cpus=2).model_copy(update={
            "interruptible": spot_price is not None, "spot_price": spot_price,
            "region": region, "provider": "acme"})
        agent = FakeAgent(live.ws_url, node_id, credential, caps, name=name)
        made.append(agent)
        await agent.connect()
        return agent

    yield make
    for agent in made:
        await agent.close()


@pytest.mark.parametrize(("spot", "max_price", "placed_on"), [
    ("never", None, "ondemand"), ("only", None, "spot"), ("prefer", None, "spot"),
    ("only", 0.01, None)])
async def test_spot_policy_against_live_nodes(live: Live, node: Make, spot: str,
                                              max_price: float | None,
                                              placed_on: str | None) -> None:
    agents = {"ondemand": await node("ondemand"), "spot": await node("spot", 0.05)}
    compute: dict[str, Any] = {"cpus": 1, "spot": spot}
    if max_price is not None:
        compute["max_price"] = max_price
    job = await live.exchange.submit(compute=compute)
    await live.exchange.tick()
    detail = await live.exchange.job(job["id"])
    if placed_on is None:  # no node sells below the ceiling: said at once, not waited for
        assert detail["state"] == "FAILED" and "max_price" in detail["reason"]
        return
    assert detail["node_id"] == agents[placed_on].node_id
    attempt = detail["attempts"][0]
    assert attempt["spot"] is (placed_on == "spot")
    if placed_on == "spot":
        assert attempt["price_per_hour"] == pytest.approx(0.05 / 2)  # one cpu of two
        assert attempt["list_price_per_hour"] > attempt["price_per_hour"]  # the same cpu


async def test_reclaim_is_validated_and_admin_only(live: Live, node: Make) -> None:
    exchange = live.exchange
    ondemand = await node("ondemand")
    spot = await node("spot", 0.05)
    user = await exchange.user_token()
    forbidden = await exchange.client.post(f"/api/v1/nodes/{spot.node_id}/reclaim", json={},
                                           headers={"Authorization": f"Bearer {user}"})
    assert forbidden.status_code == 403
    refused = await exchange.client.post(f"/api/v1/nodes/{ondemand.node_id}/reclaim", json={})
    assert refused.status_code == 422 and "not interruptible" in refused.text
    missing = await exchange.client.post("/api/v1/nodes/n-nope/reclaim", json={})
    assert missing.status_code == 404
    bad = await exchange.client.post(f"/api/v1/nodes/{spot.node_id}/reclaim",
                                     json={"notice_s": -1})
    assert bad.status_code == 422 and "notice_s" in bad.text


async def test_preempted_attempt_resumes_elsewhere_with_its_lost_work(live: Live,
                                                                      node: Make) -> None:
    exchange = live.exchange
    a = await node("a", 0.05, region="eu")
    job_id, number = await place_job(exchange, a, compute={"cpus": 1, "spot": "only"})
    b = await node("b", 0.05, region="us")
    await a.event(job_id, number, "accepted")
    await a.event(job_id, number, "started", pid=1)
    exchange.clock.advance(30)
    saved = exchange.clock() - 4  # its last checkpoint, before the notice
    response = await exchange.client.post(f"/api/v1/nodes/{a.node_id}/reclaim",
                                          json={"notice_s": 7})
    assert response.status_code == 200, response.text
    assert response.json()["attempts"] == [f"{job_id}/1"]
    notice = await a.expect("preempt")
    assert notice["notice_s"] == 7
    started = (await exchange.attempt_row(job_id, 1)).started_at
    exchange.clock.advance(3)  # it exited 1 s before its outputs were up
    await a.event(job_id, 1, "exited", exit_code=143, exited_at=exchange.clock() - 1,
                  checkpoint={"name": "step-9", "step": 9, "created_at": saved})
    detail = await exchange.job(job_id)
    first = detail["attempts"][0]
    assert first["state"] == "PREEMPTED" and detail["resume"] is True
    assert first["lost_work_s"] == pytest.approx(6.0, abs=0.01)  # from the checkpoint to exit
    assert first["preempted_at"] is not None and first["ended_at"] > started
    assert (await exchange.node_row(a.node_id)).state == "reclaimed"
    await exchange.tick()
    start = await b.expect("start_job", job_id=job_id)
    assert start["attempt"] == 2
    assert start["env"]["BOURSE_RESUME"] == "1" and start["env"]["BOURSE_ATTEMPT"] == "2"
    row = await exchange.job_row(job_id)
    assert {(e["kind"], e["value"]) for e in row.blocklist or []} == {
        ("node", a.node_id), ("provider", "acme"), ("region", "eu")}


@pytest.mark.parametrize(("signalled", "ends"), [(True, "PREEMPTED"), (False, "SUCCEEDED")],
                         ids=["exit-0-after-the-notices-sigterm", "exit-0-on-its-own"])
async def test_an_exit_0_under_notice_is_a_success_only_if_it_was_not_stopped(
        live: Live, node: Make, signalled: bool, ends: str) -> None:
    """A plain Lightning script exits 0 on SIGTERM with its training cut short: stopped by
    the notice, it resumes; one that finished by itself during the notice succeeded."""
    exchange = live.exchange
    a = await node("a", 0.05)
    job_id, number = await place_job(exchange, a, compute={"cpus": 1, "spot": "only"})
    await a.event(job_id, number, "started", pid=1)
    response = await exchange.client.post(f"/api/v1/nodes/{a.node_id}/reclaim",
                                          json={"notice_s": 7})
    assert response.status_code == 200, response.text
    data = {"exit_code": 0, **({"signalled": True} if signalled else {})}
    await a.event(job_id, number, "exited", **data)
    detail = await exchange.job(job_id)
    assert detail["attempts"][0]["state"] == ends
    assert detail["state"] == ("SUCCEEDED" if ends == "SUCCEEDED" else "PENDING")


async def test_failure_retried_per_policy_after_its_backoff(live: Live, node: Make) -> None:
    exchange = live.exchange
    a = await node("a")
    job_id, number = await place_job(exchange, a, retry={"on_failure": 1, "backoff_s": 30})
    await a.run_job(job_id, number, exit_code=1)
    detail = await exchange.job(job_id)
    assert detail["state"] == "PENDING" and "retrying (1/1, after 30 s)" in str(
        await exchange.events(job_id))
    assert (await exchange.tick()).placed == 0  # backing off
    exchange.clock.advance(31)
    await a.wait_acked(await a.heartbeat())  # the node stays alive meanwhile
    assert (await exchange.tick()).placed == 1
    await a.expect("start_job", job_id=job_id, attempt=2)
    await a.run_job(job_id, 2, exit_code=1)
    assert (await exchange.job(job_id))["state"] == "FAILED"  # no failure retries left


async def test_retry_policy_is_validated(live: Live) -> None:
    response = await live.exchange.client.post("/api/v1/jobs", json={
        "command": ["true"], "retry": {"on_preemption": -1}})
    assert response.status_code == 422 and "on_preemption" in response.text
