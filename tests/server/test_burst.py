"""Bursting through the coordinator's real routes, a real database, a data plane over an
in-memory store and fake agents: what is refused (with nothing changed), a one-node job moved
to a two-node gang that resumes, and a move off the exchange (docs/burst.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from launch_harness import launching
from server_harness import Exchange, Live, capabilities, memory_dataplane, place_job, serve
from test_launcher import launched_agent

from bourse.storage import MemoryStore

pytestmark = pytest.mark.anyio
Make = Callable[..., Any]
SPOT_PREFER = {"cpus": 1, "spot": "prefer"}  # gets its checkpoint prefix by default


@pytest.fixture
async def live_store(store_exchange: Exchange) -> AsyncIterator[Live]:
    async with serve(store_exchange) as served:
        yield served


@pytest.fixture
async def node(live_store: Live) -> AsyncIterator[Make]:
    """``await node(name, index)``: a connected fake agent on the network ``lab``."""
    made: list[FakeAgent] = []

    async def make(name: str, index: int) -> FakeAgent:
        node_id, credential = await live_store.exchange.enroll(name)
        caps = capabilities(cpus=2, network="lab", address=f"10.9.0.{index + 1}")
        agent = FakeAgent(live_store.ws_url, node_id, credential, caps, name=name)
        made.append(agent)
        await agent.connect()
        return agent

    yield make
    for agent in made:
        await agent.close()


async def _running(exchange: Exchange, agent: FakeAgent, **spec: Any) -> str:
    job_id, number = await place_job(exchange, agent, **spec)
    await agent.event(job_id, number, "accepted")
    await agent.event(job_id, number, "started", pid=1)
    return job_id


async def _first_start(agents: list[FakeAgent], job_id: str) -> dict[str, Any]:
    """The first start of the job any of the agents is sent (sent after the commit)."""
    waits = [asyncio.ensure_future(a.expect("start_job", job_id=job_id)) for a in agents]
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    found: dict[str, Any] = next(iter(done)).result()
    return found


async def _burst(exchange: Exchange, job_id: str, **body: Any) -> Any:
    return await exchange.client.post(f"/api/v1/jobs/{job_id}/burst", json=body)


async def test_refusals_say_why_and_change_nothing(live_store: Live, node: Make) -> None:
    exchange = live_store.exchange
    a = await node("a", 0)
    assert (await _burst(exchange, "j-nope", compute={"cpus": 1})).status_code == 404
    plain = await _running(exchange, a, compute={"cpus": 1})  # no data, no spot: no place
    refused = await _burst(exchange, plain, compute={"cpus": 2})
    assert refused.status_code == 422 and "no checkpoint place" in refused.text
    job = await _running(exchange, a, compute=SPOT_PREFER)
    never = await _burst(exchange, job, compute={"gpu": "a100:8"})
    assert never.status_code == 422, never.text
    assert "no node on this exchange can ever run it" in never.text and "gpu" in never.text
    for body, words in (({}, "neither"), ({"compute": {"cpus": 1}, "local": True}, "both"),
                        ({"compute": SPOT_PREFER}, "already runs on")):
        response = await _burst(exchange, job, **body)
        assert response.status_code == 422 and words in response.text, response.text
    waiting = await exchange.submit(compute={"cpus": 64, "spot": "prefer"})  # never placed
    assert (await _burst(exchange, waiting["id"], compute={"cpus": 1})).status_code == 409
    await a.barrier()
    assert a.received("cancel_job") == []
    row = await exchange.attempt_row(job, 1)
    assert row.preempt_at is None and (await exchange.job(job))["state"] == "RUNNING"


async def test_a_one_node_job_bursts_to_a_two_node_gang_and_resumes(live_store: Live,
                                                                   node: Make) -> None:
    exchange = live_store.exchange
    a = await node("a", 0)
    job = await _running(exchange, a, compute=SPOT_PREFER)
    b = await node("b", 1)  # joins later: the gang needs two nodes of one network
    response = await _burst(exchange, job, compute={"cpus": 1, "num_nodes": 2}, notice_s=20,
                            reason="eta > 6h")
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["attempt"] == 1 and result["moved_to"].startswith("2 nodes")
    assert result["checkpoint"] == f"s3://bourse/jobs/{job}/checkpoints/"
    stop = await a.expect("cancel_job", job_id=job)
    assert stop["grace_s"] == 20 and "eta > 6h" in stop["reason"]
    again = await _burst(exchange, job, compute={"cpus": 2})
    assert again.status_code == 409 and "moving already" in again.text
    saved = {"name": "step-00000042", "step": 42, "created_at": 1.0}
    await a.event(job, 1, "exited", exit_code=143, signalled=True, checkpoint=saved)  # left

    detail = await exchange.job(job)
    assert detail["state"] in ("PENDING", "SCHEDULED") and detail["resume"] is True
    assert detail["attempts"][0]["state"] == "PREEMPTED"
    assert detail["spec"]["compute"]["num_nodes"] == 2
    row = await exchange.job_row(job)
    assert not row.retry_counts and not row.blocklist and row.retries_used == 0
    events = {e["kind"]: e for e in await exchange.events(job)}
    assert events["moved"]["data"]["to"].startswith("2 nodes")
    assert "eta > 6h" in events["burst"]["message"]
    assert [e["state"] for e in await exchange.events(job) if e["kind"] == "state"][-2:] \
        in (["RUNNING", "PENDING"], ["PENDING", "SCHEDULED"])
    run = (await exchange.client.get(f"/api/v1/tracking/runs/{job}")).json()
    assert run["run_id"] == job and [(m["attempt"], m["from_compute"], m["to_compute"])
                                     for m in run["moves"]] == [
        (1, events["moved"]["data"]["from"], events["moved"]["data"]["to"])]
    assert run["moves"][0]["time"] == events["moved"]["time"]  # the marker on the run
    assert run["moves"][0]["step"] == events["moved"]["data"]["step"] == 42  # and its step
    await exchange.tick()
    start = await _first_start([a, b], job)
    assert start["attempt"] == 2 and start["gang"]["rank"] == 0  # rank 0 first, as any gang
    assert len(start["gang"]["addresses"]) == 2
    assert start["env"]["BOURSE_RESUME"] == "1"
    assert start["data"]["checkpoint"] == result["checkpoint"]  # the same prefix


async def test_a_job_moved_to_a_local_run_ends_with_its_checkpoint(live_store: Live,
                                                                   node: Make) -> None:
    exchange = live_store.exchange
    a = await node("a", 0)
    job = await _running(exchange, a, compute=SPOT_PREFER)
    response = await _burst(exchange, job, local=True, notice_s=5)
    assert response.status_code == 200 and response.json()["moved_to"].startswith("a local")
    await a.expect("cancel_job", job_id=job)
    await a.event(job, 1, "exited", exit_code=143, signalled=True)
    detail = await exchange.job(job)
    assert detail["state"] == "CANCELLED"
    assert f"s3://bourse/jobs/{job}/checkpoints/" in detail["reason"]
    moved = [e for e in await exchange.events(job) if e["kind"] == "moved"]
    assert [e["data"]["to"] for e in moved] == ["a local run"]


async def test_a_job_bursts_itself_with_its_own_token_and_nothing_else(live_store: Live,
                                                                      node: Make) -> None:
    """What BourseElastic in an exchange job does: the start's BOURSE_URL and burst token move
    that job, and only that job, while it runs."""
    exchange = live_store.exchange
    a = await node("a", 0)
    other = await _running(exchange, a, compute=SPOT_PREFER)
    job_id = (await exchange.submit(compute=SPOT_PREFER))["id"]
    await exchange.tick()
    start = await a.expect("start_job", job_id=job_id)
    number = int(start["attempt"])
    assert start["env"]["BOURSE_URL"] == exchange.config.url
    token = start["secret_env"]["BOURSE_BURST_TOKEN"]
    await a.event(job_id, number, "accepted")
    await a.event(job_id, number, "started", pid=1)

    def as_job(secret: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {secret}"}

    body = {"compute": {"cpus": 2, "spot": "prefer"}}
    for secret, where, status in ((token, f"/api/v1/jobs/{other}/burst", 403),
                                  (token[:-2] + "xx", f"/api/v1/jobs/{job_id}/burst", 401),
                                  (start["secret_env"]["MLFLOW_TRACKING_TOKEN"],
                                   f"/api/v1/jobs/{job_id}/burst", 401),
                                  (token, f"/api/v1/jobs/{job_id}", 401),
                                  (token, f"/api/v1/jobs/{job_id}/cancel", 401)):
        refused = await exchange.client.post(where, json=body, headers=as_job(secret)) \
            if where.endswith(("burst", "cancel")) else \
            await exchange.client.get(where, headers=as_job(secret))
        assert refused.status_code == status, (where, refused.text)
    assert (await exchange.job(other))["state"] == "RUNNING"
    moved = await exchange.client.post(f"/api/v1/jobs/{job_id}/burst", json=body,
                                       headers=as_job(token))
    assert moved.status_code == 200, moved.text
    await a.expect("cancel_job", job_id=job_id)
    cancelled = await exchange.client.post(f"/api/v1/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200
    await a.event(job_id, number, "exited", exit_code=143, signalled=True)
    assert (await exchange.job(job_id))["state"] == "CANCELLED"
    ended = await exchange.client.post(f"/api/v1/jobs/{job_id}/burst", json=body,
                                       headers=as_job(token))
    assert ended.status_code == 401 and "has ended" in ended.text


async def test_a_burst_no_node_fits_launches_on_a_cloud(tmp_path: Path, database_url: str,
                                                        store: MemoryStore) -> None:
    """The target fits no node but a cloud sells it: accepted, and the launcher launches for
    the moved job as for any waiting one; the launched node resumes it."""
    async with launching(tmp_path, database_url, dataplane=memory_dataplane(store)) as run, \
            serve(run.exchange) as live:
        exchange = run.exchange
        node_id, credential = await exchange.enroll("cpu")
        cpu = FakeAgent(live.ws_url, node_id, credential, capabilities(cpus=2), name="cpu")
        await cpu.connect()
        try:
            job = await _running(exchange, cpu, compute=SPOT_PREFER)
            assert not run.cloud.calls
            moved = await _burst(exchange, job, compute={"gpu": "a100:8", "spot": "prefer"})
            assert moved.status_code == 200, moved.text
            await cpu.expect("cancel_job", job_id=job)
            await cpu.event(job, 1, "exited", exit_code=143, signalled=True)
            await run.cycle()
            [call] = run.cloud.calls
            assert call.tags()["bourse:job"] == job and call.instance_type.startswith("p4")
            launched = await launched_agent(run, live)
            try:
                await run.tick()
                await exchange.tick()
                start = await launched.expect("start_job", job_id=job)
                assert start["attempt"] == 2 and start["env"]["BOURSE_RESUME"] == "1"
                assert start["data"]["checkpoint"] == f"s3://bourse/jobs/{job}/checkpoints/"
            finally:
                await launched.close()
        finally:
            await cpu.close()
