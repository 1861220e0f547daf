"""Placement onto live nodes' free capacity: CPUs (at least one per job), memory and GPUs are
reserved by attempts; GPU jobs only go to GPU nodes; nodes that lost a job are avoided."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import (
    NOTHING_CONNECTED,
    Exchange,
    Live,
    job_spec,
    place_job,
    until_disconnected,
)

from bourse.core.offer import Offer
from bourse.server.scheduler import PLACEMENT_BATCH
from bourse.server.services.placement import PAGE, first_page

pytestmark = pytest.mark.anyio
Factory = Callable[..., Any]


async def _submit_all(exchange: Exchange, count: int, **spec: Any) -> list[str]:
    """Jobs submitted one second apart (placement takes the oldest first)."""
    ids = []
    for _ in range(count):
        ids.append((await exchange.submit(**spec))["id"])
        exchange.clock.advance(1)
    return ids


async def _started(agent: FakeAgent, *job_ids: str) -> list[str]:
    """The jobs the agent was told to start, after every queued command has arrived."""
    await agent.barrier()
    starts = agent.received("start_job")
    for body in starts:
        await agent.expect("start_job", job_id=body["job_id"])
    return [s["job_id"] for s in starts if not job_ids or s["job_id"] in job_ids]


async def test_a_two_cpu_node_runs_two_one_cpu_jobs_and_the_third_waits(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory(cpus=2)
    first, second, third = await _submit_all(exchange, 3, compute={"cpus": 1})
    report = await exchange.tick()
    assert (report.placed, report.unplaced) == (2, 1)
    assert await _started(agent) == [first, second]
    waiting = await exchange.job(third)
    assert waiting["state"] == "PENDING"
    assert "busy" in waiting["pending_reason"]
    assert (await exchange.tick()).placed == 0
    await agent.run_job(first, 1)  # the hub fills the freed CPU in the exit's transaction
    assert await _started(agent) == [third]
    assert (await exchange.tick()).placed == 0
    placed = await exchange.job(third)
    assert (placed["state"], placed["pending_reason"]) == ("SCHEDULED", None)


async def test_a_job_reserves_the_cpus_it_asks_for_and_one_when_silent(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory(cpus=2)
    halves = await _submit_all(exchange, 3, compute={"cpus": "0.5"})
    silent = await _submit_all(exchange, 1, compute={})
    assert (await exchange.tick()).placed == 3  # 3 x 0.5 CPU; the silent job needs a whole one
    assert await _started(agent) == halves
    row = await exchange.attempt_row(halves[0], 1)
    assert row.resources == {"cpus": 0.5, "memory_gib": 0.0, "gpus": 0.0}
    assert (await exchange.job(silent[0]))["state"] == "PENDING"


async def test_memory_is_reserved(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory(cpus=4, memory_gib=8)
    first, second = await _submit_all(exchange, 2, compute={"cpus": 1, "memory": "5GB"})
    assert (await exchange.tick()).placed == 1
    assert await _started(agent) == [first]
    reason = (await exchange.job(second))["pending_reason"]
    assert "memory" in reason
    small = (await exchange.submit(compute={"cpus": 1, "memory": "3GB"}))["id"]
    assert (await exchange.tick()).placed == 1
    assert await _started(agent) == [small]


async def test_gpu_jobs_go_only_to_gpu_nodes_and_reserve_their_gpus(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    cpu_node: FakeAgent = await agent_factory("cpu-box", cpus=8)
    gpu_node: FakeAgent = await agent_factory("gpu-box", cpus=8, gpus=1)
    gpu_jobs = await _submit_all(exchange, 2, compute={"gpu": "a100-80gb", "cpus": 1})
    assert (await exchange.tick()).placed == 1
    assert await _started(gpu_node) == gpu_jobs[:1]
    assert await _started(cpu_node) == []
    waiting = await exchange.job(gpu_jobs[1])
    assert waiting["state"] == "PENDING"
    assert "has no GPU" in waiting["pending_reason"]
    assert (await exchange.attempt_row(gpu_jobs[0], 1)).resources["gpus"] == 1
    cpu_job = (await exchange.submit(compute={"cpus": 1}))["id"]
    assert (await exchange.tick()).placed == 1
    assert await _started(cpu_node) == [cpu_job]  # the cheaper node for a CPU job
    await gpu_node.run_job(gpu_jobs[0], 1)
    await exchange.tick()
    assert await _started(gpu_node) == gpu_jobs[1:]


async def away(agent: FakeAgent, exchange: Exchange) -> None:
    """Connect the agent's node once (so the exchange knows what it is), then leave."""
    await agent.close()
    await until_disconnected(exchange, agent.node_id)


async def test_a_gpu_job_waits_while_its_node_is_away(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    cpu_node: FakeAgent = await agent_factory(cpus=8)
    gpu_node: FakeAgent = await agent_factory("late-gpu", gpus=2)
    await away(gpu_node, exchange)
    job = await exchange.submit(compute={"gpu": "a100-80gb"})
    assert (await exchange.tick()).unplaced == 1
    reason = (await exchange.job(job["id"]))["pending_reason"]
    assert reason.startswith("waiting for room: the nodes that can run it are busy or away")
    assert "has no GPU" in reason  # the free room's explanation, a line per constraint
    await gpu_node.connect()
    await exchange.tick()
    assert await _started(gpu_node) == [job["id"]]
    assert await _started(cpu_node) == []


async def test_a_job_no_known_node_could_ever_run_fails_at_once(
        live: Live, agent_factory: Factory) -> None:
    """No enrolled node has a GPU, and no offer can be launched: waiting would be forever."""
    exchange = live.exchange
    cpu_node: FakeAgent = await agent_factory(cpus=8)
    job = await exchange.submit(compute={"gpu": "v100"})
    report = await exchange.place()  # the pass a submit causes, not the periodic one
    assert (report.placed, report.failed) == (0, 1)
    detail = await exchange.job(job["id"])
    assert detail["state"] == "FAILED"
    first, *lines = detail["reason"].split("\n")
    assert first == ("no node on this exchange can ever run it: none of the 1 known node(s) "
                     "has what it asks, and no cloud offer can be launched")
    assert any("has no GPU" in line for line in lines), lines
    assert await _started(cpu_node) == []


async def test_a_retry_is_never_failed_for_want_of_a_node(
        live: Live, agent_factory: Factory) -> None:
    """A job that ran once had its node: its retry waits for it, saying so."""
    exchange = live.exchange
    gpu: FakeAgent = await agent_factory("gpu", gpus=1)
    job_id, attempt = await place_job(exchange, gpu, compute={"gpu": "a100-80gb"})
    await gpu.event(job_id, attempt, "started", pid=1)
    exchange.clock.advance(200)  # silent past the loss window: lost, retried
    report = await exchange.tick()
    assert report.lost_nodes == [gpu.node_id]
    detail = await exchange.job(job_id)
    assert (detail["state"], detail["attempt"]) == ("PENDING", 1)
    assert detail["pending_reason"].startswith(NOTHING_CONNECTED.pattern[1:-1].replace(
        "(verified )?", "verified "))


async def test_an_exchange_no_node_joined_yet_lets_jobs_wait(exchange: Exchange) -> None:
    job = await exchange.submit(compute={"gpu": "v100"})
    report = await exchange.tick()
    assert (report.placed, report.failed, report.unplaced) == (0, 0, 1)
    reason = (await exchange.job(job["id"]))["pending_reason"]
    assert reason.startswith("no node has joined this exchange yet")


async def test_a_job_asking_for_two_gpus_needs_a_node_with_two_free(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    one: FakeAgent = await agent_factory("one-gpu", gpus=1)
    two: FakeAgent = await agent_factory("two-gpus", gpus=2)
    await away(two, exchange)
    job = await exchange.submit(compute={"gpu": "a100-80gb:2"})
    assert (await exchange.tick()).placed == 0
    await two.connect()
    assert (await exchange.tick()).placed == 1
    assert await _started(two) == [job["id"]]
    assert await _started(one) == []


async def test_a_node_that_lost_a_job_is_avoided_while_another_fits(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    first: FakeAgent = await agent_factory("first", cpus=1)
    job_id, attempt = await place_job(exchange, first)
    await first.event(job_id, attempt, "started", pid=1)
    second: FakeAgent = await agent_factory("second", cpus=1)
    await first.heartbeat(running=[])  # lost on first; first is free again
    await exchange.tick()
    assert await _started(second) == [job_id]
    assert await _started(first) == []


async def test_an_avoided_node_is_used_when_nothing_else_fits(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    first: FakeAgent = await agent_factory("first", cpus=1)
    job_id, attempt = await place_job(exchange, first)
    await first.event(job_id, attempt, "started", pid=1)
    second: FakeAgent = await agent_factory("second", cpus=1)
    blocker, _ = await place_job(exchange, second)
    await first.heartbeat(running=[])
    await exchange.tick()
    assert await _started(first) == [job_id]
    assert (await exchange.job_row(job_id)).avoid_nodes == [first.node_id]
    assert blocker != job_id


async def test_nothing_is_placed_without_connected_nodes(exchange: Exchange) -> None:
    await exchange.enroll("offline")
    job = await exchange.submit()
    report = await exchange.tick()
    assert (report.placed, report.unplaced) == (0, 1)
    assert NOTHING_CONNECTED.match((await exchange.job(job["id"]))["pending_reason"])


async def test_a_batch_is_placed_in_submission_order(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory(cpus=1)
    first = (await exchange.submit())["id"]
    exchange.clock.advance(1)
    second = (await exchange.submit())["id"]
    await exchange.tick()
    await agent.run_job(first, 1)
    await exchange.tick()
    assert await _started(agent) == [first, second]


async def test_jobs_of_one_batch_are_placed_in_batch_order(
        live: Live, agent_factory: Factory) -> None:
    """A batch once shared one created_at, and placement broke the tie by random job id."""
    exchange = live.exchange
    agent: FakeAgent = await agent_factory(cpus=8)
    response = await exchange.client.post("/api/v1/jobs/batch", json={
        "jobs": [job_spec(name=f"task-{i}") for i in range(8)]})
    assert response.status_code == 201, response.text
    submitted = [j["id"] for j in response.json()["jobs"]]
    await exchange.tick()
    assert await _started(agent) == submitted


async def test_a_multi_node_job_never_runs_on_one_node(
        live: Live, agent_factory: Factory) -> None:
    """Placement once ignored num_nodes and started such a job on a single node."""
    exchange = live.exchange
    agent: FakeAgent = await agent_factory(cpus=8, network="lab", address="10.0.0.1")
    job = (await exchange.submit(compute={"num_nodes": 2}))["id"]
    await exchange.tick()
    assert await _started(agent) == []
    waiting = await exchange.job(job)
    assert waiting["state"] == "PENDING"
    assert "needs 2 nodes of one network" in waiting["pending_reason"]


async def test_the_pending_reason_follows_the_nodes(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory(cpus=1)
    _, waiting = await _submit_all(exchange, 2)
    await exchange.tick()
    assert "busy" in (await exchange.job(waiting))["pending_reason"]
    await agent.close()
    await until_disconnected(exchange, agent.node_id)
    await exchange.tick()
    assert NOTHING_CONNECTED.match((await exchange.job(waiting))["pending_reason"])


async def test_jobs_that_cannot_fit_at_the_head_do_not_hide_the_ones_behind(
        live: Live, agent_factory: Factory) -> None:
    """More jobs no free node can take than one pass's limit, at the head of the queue: the
    jobs behind them that fit the idle node are placed in the same pass."""
    exchange = live.exchange
    gpu: FakeAgent = await agent_factory("gpu-box", gpus=8)
    await away(gpu, exchange)  # known (its jobs wait for it), but not here now
    agent: FakeAgent = await agent_factory(cpus=4)
    big = (await exchange.client.post("/api/v1/jobs/batch", json={"jobs": [
        job_spec(compute={"gpu": "a100-80gb:8"}) for _ in range(PLACEMENT_BATCH + 10)]}))
    assert big.status_code == 201, big.text
    exchange.clock.advance(1)
    cpu = await _submit_all(exchange, 4, compute={"cpus": 1})
    report = await exchange.tick()
    assert (report.placed, report.unplaced) == (4, PLACEMENT_BATCH + 10)
    assert await _started(agent) == cpu
    waiting = await exchange.job(big.json()["jobs"][-1]["id"])
    assert waiting["state"] == "PENDING"
    assert waiting["pending_reason"].startswith("waiting for room")


async def test_jobs_that_fit_wait_their_turn_oldest_first_and_say_so(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory(cpus=1)
    first, second = await _submit_all(exchange, 2, compute={"cpus": "0.5"})
    third = (await _submit_all(exchange, 1, compute={"cpus": "0.75"}))[0]
    report = await exchange.tick()
    assert (report.placed, report.unplaced) == (2, 1)
    assert await _started(agent) == [first, second]
    assert "busy" in (await exchange.job(third))["pending_reason"]


async def test_projects_share_the_free_room(live: Live, agent_factory: Factory) -> None:
    """FIFO within a project; between projects, the one running fewer jobs goes first: a
    long queue in one project does not keep another project's first job waiting."""
    exchange = live.exchange
    agent: FakeAgent = await agent_factory(cpus=2)
    other = {"Authorization": f"Bearer {await exchange.project_token('other')}"}
    busy = await _submit_all(exchange, 5, compute={"cpus": 1})
    exchange.clock.advance(1)
    response = await exchange.client.post("/api/v1/jobs", json=job_spec(compute={"cpus": 1}),
                                          headers=other)
    assert response.status_code == 201, response.text
    report = await exchange.tick()
    assert report.placed == 2
    assert await _started(agent) == [busy[0], response.json()["id"]]


def test_a_pass_first_reads_what_the_free_cpus_can_take() -> None:
    def offer(cpus: float) -> Offer:
        return Offer(id="n", provider="node", instance_type="n", region="local", gpu=None,
                     gpu_count=0, gpu_memory_mib=None, cpus=cpus, memory_gib=8.0,
                     price=0.1)

    assert first_page([offer(1.0)]) == 1
    assert first_page([offer(1.5), offer(0.5)]) == 2
    assert first_page([offer(0.25)]) == 1
    assert first_page([offer(64.0)]) == PAGE


async def test_a_pending_timeout_ends_the_wait(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory(cpus=1)
    running = await exchange.submit()
    exchange.clock.advance(1)
    waits = await exchange.submit(pending_timeout_s=30)
    await exchange.tick()
    assert await _started(agent) == [running["id"]]
    exchange.clock.advance(29)
    assert (await exchange.tick()).failed == 0
    exchange.clock.advance(2)
    assert (await exchange.tick()).failed == 1
    detail = await exchange.job(waits["id"])
    assert detail["state"] == "FAILED"
    assert detail["reason"].startswith("waited 30 s without being placed (pending timeout): "
                                       "waiting for room")


@pytest.mark.parametrize("timeout", [0, -1, 1e12, "soon"])
async def test_a_bad_pending_timeout_is_refused(exchange: Exchange, timeout: object) -> None:
    response = await exchange.client.post("/api/v1/jobs", json=job_spec(
        pending_timeout_s=timeout))
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "pending_timeout_s"
