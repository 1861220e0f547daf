"""Compliance tags: a project that requires a tag has its jobs placed only on nodes an admin
gave that tag; its jobs wait (saying why) while such a node is away, and fail at once (saying
why) when there is none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Live, until_disconnected

pytestmark = pytest.mark.anyio


async def test_a_required_tag_keeps_jobs_off_untagged_nodes(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    exchange = live.exchange
    made = await exchange.client.post("/api/v1/projects", json={
        "name": "clinic", "required_tags": ["hipaa"]})
    assert made.json()["required_tags"] == ["hipaa"]
    member = {"Authorization": f"Bearer {await exchange.project_token('clinic')}"}
    plain: FakeAgent = await agent_factory("plain", cpus=8)
    certified: FakeAgent = await agent_factory("certified", cpus=2)
    tagged = await exchange.client.put(f"/api/v1/nodes/{certified.node_id}/tags",
                                       json={"tags": ["hipaa", "soc2"]})
    assert tagged.json()["tags"] == ["hipaa", "soc2"]
    await certified.close()  # away for now: its jobs wait for it
    await until_disconnected(exchange, certified.node_id)
    job = await exchange.client.post("/api/v1/jobs", headers=member,
                                     json={"command": ["true"], "compute": {"cpus": 1}})
    assert job.json()["spec"]["compute"]["tags"] == ["hipaa"]
    await exchange.tick()
    waiting = await exchange.job(job.json()["id"])
    assert waiting["state"] == "PENDING" and "tags" in waiting["pending_reason"]
    await certified.connect()
    await exchange.tick()
    await certified.expect("start_job", job_id=job.json()["id"])
    await plain.barrier()
    assert not plain.received("start_job")
    # the default project requires nothing: the untagged node will do (it alone has 2 CPUs
    # free; nodes of one price per CPU would otherwise tie, broken by their random ids)
    other = await exchange.submit(compute={"cpus": 2})
    await exchange.tick()
    assert (await exchange.job(other["id"]))["node_id"] == plain.node_id


async def test_only_admins_tag_nodes(live: Live, agent_factory: Callable[..., Any]) -> None:
    exchange = live.exchange
    provider = {"Authorization": f"Bearer {await exchange.project_token('rack', 'provider')}"}
    agent: FakeAgent = await agent_factory("mine")
    refused = await exchange.client.put(f"/api/v1/nodes/{agent.node_id}/tags",
                                        json={"tags": ["hipaa"]}, headers=provider)
    assert refused.status_code == 403
    bad = await exchange.client.put(f"/api/v1/nodes/{agent.node_id}/tags",
                                    json={"tags": ["Not A Tag"]})
    assert bad.status_code == 422
