"""A job driven by a fake agent's events: states, duplicates, fencing of stale attempts,
cancellation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Exchange, Live, place_job

pytestmark = pytest.mark.anyio
Factory = Callable[..., Any]


def _states(events: list[dict[str, Any]]) -> list[str]:
    return [e["state"] for e in events if e["kind"] == "state"]


async def test_accepted_started_exited_zero_succeeds(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory("worker")
    job_id, attempt = await place_job(exchange, agent)
    scheduled = await exchange.job(job_id)
    assert (scheduled["state"], scheduled["attempt"], scheduled["node_id"]) == (
        "SCHEDULED", 1, agent.node_id)
    assert scheduled["node_name"] == "worker"
    [listed] = (await exchange.client.get("/api/v1/jobs")).json()["jobs"]
    assert (listed["node_id"], listed["node_name"]) == (agent.node_id, "worker")
    expected = ["STARTING", "RUNNING", "SUCCEEDED"]
    for kind, data, state in zip(["accepted", "started", "exited"],
                                 [{}, {"pid": 42}, {"exit_code": 0}], expected, strict=True):
        exchange.clock.advance(1)
        await agent.event(job_id, attempt, kind, **data)
        assert (await exchange.job(job_id))["state"] == state
    job = await exchange.job(job_id)
    assert (job["exit_code"], job["reason"], job["updated_at"]) == (
        0, "exited with code 0", exchange.clock())
    [shown] = job["attempts"]
    assert (shown["state"], shown["node_name"], shown["exit_code"]) == (
        "SUCCEEDED", "worker", 0)
    assert shown["ended_at"] == exchange.clock()
    assert shown["placement"].startswith("worker: ")
    events = await exchange.events(job_id)
    assert _states(events) == ["PENDING", "SCHEDULED", *expected]
    assert [e["kind"] for e in events if e["kind"] != "state"] == [
        "accepted", "started", "exited"]
    assert any("process 42 started" in e["message"] for e in events)


@pytest.mark.parametrize(("data", "reason"), [
    ({"exit_code": 3}, "exited with code 3"),
    ({"exit_code": -9, "signal": 9}, "killed by signal 9"),
    ({"exit_code": 1, "reason": "out of memory"}, "out of memory"),
])
async def test_a_non_zero_exit_fails(live: Live, agent_factory: Factory,
                                     data: dict[str, Any], reason: str) -> None:
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(live.exchange, agent)
    await agent.event(job_id, attempt, "started", pid=1)
    await agent.event(job_id, attempt, "exited", **data)
    job = await live.exchange.job(job_id)
    assert (job["state"], job["exit_code"], job["reason"]) == (
        "FAILED", data["exit_code"], reason)
    assert job["attempts"][0]["state"] == "FAILED"


async def test_start_failed_fails_the_job(live: Live, agent_factory: Factory) -> None:
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(live.exchange, agent)
    await agent.event(job_id, attempt, "accepted")
    await agent.event(job_id, attempt, "start_failed", reason="no such file: train.py")
    job = await live.exchange.job(job_id)
    assert job["state"] == "FAILED"
    assert job["reason"] == "could not start: no such file: train.py"
    report = await live.exchange.tick()
    assert report.placed == 0  # a failed start is not retried


async def test_a_start_the_node_could_not_make_goes_to_another_node(
        live: Live, agent_factory: Factory) -> None:
    """``retry_elsewhere`` (the job's port was taken on the node): the attempt is LOST, not
    the job's failure, and the retry avoids that node."""
    exchange = live.exchange
    first: FakeAgent = await agent_factory("first")
    job_id, attempt = await place_job(exchange, first)
    await first.event(job_id, attempt, "accepted")
    second: FakeAgent = await agent_factory("second")
    await first.event(job_id, attempt, "start_failed", retry_elsewhere=True,
                      reason="port 8000 is already in use on this node, by pid 7 (nginx)")
    await exchange.tick()
    start = await second.expect("start_job", job_id=job_id)
    assert start["attempt"] == 2
    job = await exchange.job(job_id)
    assert job["attempts"][0]["state"] == "LOST"
    assert "pid 7 (nginx)" in job["attempts"][0]["reason"]


async def test_events_may_skip_accepted(live: Live, agent_factory: Factory) -> None:
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(live.exchange, agent)
    await agent.event(job_id, attempt, "started", pid=7)
    assert (await live.exchange.job(job_id))["state"] == "RUNNING"
    await agent.event(job_id, attempt, "accepted")  # late: changes nothing
    await agent.event(job_id, attempt, "preparing")
    await agent.event(job_id, attempt, "info", message="downloading bundle")
    assert (await live.exchange.job(job_id))["state"] == "RUNNING"


async def test_duplicate_events_are_stored_once_and_acknowledged(
        live: Live, agent_factory: Factory) -> None:
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(live.exchange, agent)
    accepted = agent.job_event(job_id, attempt, "accepted", seq=0)
    started = agent.job_event(job_id, attempt, "started", seq=1, pid=1)
    for event in (accepted, started, accepted, started):
        await agent.send(event)  # each waits for its own ack
    exited = agent.job_event(job_id, attempt, "exited", seq=2, exit_code=0)
    ids = [await agent.send(exited, ack=False) for _ in range(3)]  # one batch, likely
    await agent.wait_acked(*ids)
    events = await live.exchange.events(job_id)
    assert [e["kind"] for e in events if e["kind"] != "state"] == [
        "accepted", "started", "exited"]
    assert _states(events) == ["PENDING", "SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED"]


async def test_duplicate_log_chunks_are_stored_once(live: Live, agent_factory: Factory) -> None:
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(live.exchange, agent)
    await agent.log(job_id, attempt, 0, b"hello\n")
    await agent.log(job_id, attempt, 0, b"hello\n")
    chunk = agent.log_chunk(job_id, attempt, 1, b"world\n", offset=6)
    ids = [await agent.send(chunk, ack=False) for _ in range(3)]
    await agent.wait_acked(*ids)
    page = (await live.exchange.client.get(f"/api/v1/jobs/{job_id}/logs")).json()
    assert [(c["seq"], c["offset"]) for c in page["chunks"]] == [(0, 0), (1, 6)]


async def test_another_nodes_attempt_is_ignored(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    owner: FakeAgent = await agent_factory("owner")
    job_id, attempt = await place_job(exchange, owner)
    intruder: FakeAgent = await agent_factory("intruder")
    await intruder.log(job_id, attempt, 0, b"not mine\n")
    await intruder.event(job_id, attempt, "started", pid=1)
    await intruder.event(job_id, attempt, "exited", exit_code=0)
    job = await exchange.job(job_id)
    assert (job["state"], job["node_id"]) == ("SCHEDULED", owner.node_id)
    page = (await exchange.client.get(f"/api/v1/jobs/{job_id}/logs")).json()
    assert page["chunks"] == []
    await owner.log(job_id, attempt, 0, b"mine\n")
    page = (await exchange.client.get(f"/api/v1/jobs/{job_id}/logs")).json()
    assert len(page["chunks"]) == 1
    await intruder.event("j-000000000000", 1, "exited", exit_code=0)  # no such job: acked


async def _move_to_second_attempt(
        exchange: Exchange, agent_factory: Factory) -> tuple[str, FakeAgent, FakeAgent]:
    """Place a job on a first node, lose it there (a heartbeat without it), re-place it on a
    second node (connected only then, so that the first placement cannot pick it)."""
    first: FakeAgent = await agent_factory("first")
    job_id, attempt = await place_job(exchange, first)
    await first.event(job_id, attempt, "accepted")
    await first.heartbeat(running=[])
    second: FakeAgent = await agent_factory("second")
    await exchange.tick()
    start = await second.expect("start_job", job_id=job_id)
    assert start["attempt"] == attempt + 1 == 2
    return job_id, first, second


async def test_events_of_a_stale_attempt_never_change_the_job(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    job_id, first, second = await _move_to_second_attempt(exchange, agent_factory)
    await second.event(job_id, 2, "accepted")
    before = await exchange.job(job_id)
    await first.log(job_id, 1, 5, b"late output of attempt 1\n")
    await first.event(job_id, 1, "exited", exit_code=3)
    await first.event(job_id, 1, "start_failed", reason="late")
    after = await exchange.job(job_id)
    assert after == before
    assert (after["state"], after["attempt"], after["node_id"]) == (
        "STARTING", 2, second.node_id)
    assert [a["state"] for a in after["attempts"]] == ["LOST", "STARTING"]


async def test_a_lost_attempts_late_success_ends_the_job_once_and_cancels_the_retry(
        live: Live, agent_factory: Factory) -> None:
    """It exited 0 (outputs up) before its node was given up; the report came later. The work
    is done: the job succeeds with its result, and the retry is stopped and discarded."""
    exchange = live.exchange
    job_id, first, second = await _move_to_second_attempt(exchange, agent_factory)
    await second.event(job_id, 2, "accepted")
    await second.event(job_id, 2, "started", pid=7)
    seq = first.next_seq(job_id, 1)
    for _ in range(2):  # replayed after a reconnect: taken once
        await first.send(first.job_event(job_id, 1, "exited", seq=seq, exit_code=0,
                                         outputs={"model": "s3://b/m"}))
    cancel = await second.expect("cancel_job", job_id=job_id)
    assert (cancel["attempt"], cancel["stale"]) == (2, True)
    job = await exchange.job(job_id)
    assert (job["state"], job["exit_code"], job["node_id"]) == ("SUCCEEDED", 0, first.node_id)
    assert job["outputs"] == {"model": "s3://b/m"}
    assert "arrived after the attempt was given up" in job["reason"]
    assert [a["state"] for a in job["attempts"]] == ["SUCCEEDED", "CANCELLED"]
    states = _states(await exchange.events(job_id))
    assert states.count("SUCCEEDED") == 1
    await second.event(job_id, 2, "exited", exit_code=0)  # the retry's own end changes nothing
    assert (await exchange.job(job_id))["attempts"][1]["state"] == "CANCELLED"


async def test_a_late_success_while_the_retry_waits_to_be_placed(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    first: FakeAgent = await agent_factory("first")
    job_id, attempt = await place_job(exchange, first)
    await first.event(job_id, attempt, "started", pid=1)
    await first.heartbeat(running=[])  # given up; no other node: the retry waits
    assert (await exchange.job(job_id))["state"] == "PENDING"
    await first.event(job_id, attempt, "exited", exit_code=0)
    job = await exchange.job(job_id)
    assert (job["state"], job["attempt"]) == ("SUCCEEDED", 1)
    assert (await exchange.tick()).placed == 0


@pytest.mark.parametrize("late", [{"exit_code": 1}, {"exit_code": 0, "outputs_error": "x"},
                                  {"exit_code": 0, "fenced": True}],
                         ids=["failed", "outputs-not-up", "fenced"])
async def test_a_late_report_that_is_no_success_leaves_the_retry_alone(
        live: Live, agent_factory: Factory, late: dict[str, Any]) -> None:
    exchange = live.exchange
    job_id, first, _ = await _move_to_second_attempt(exchange, agent_factory)
    await first.event(job_id, 1, "exited", **late)
    job = await exchange.job(job_id)
    assert (job["state"], job["attempt"]) == ("SCHEDULED", 2)
    assert [a["state"] for a in job["attempts"]] == ["LOST", "SCHEDULED"]


async def test_a_late_success_after_the_retry_succeeded_changes_nothing(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    job_id, first, second = await _move_to_second_attempt(exchange, agent_factory)
    await second.run_job(job_id, 2)
    before = await exchange.job(job_id)
    await first.event(job_id, 1, "exited", exit_code=0)
    assert await exchange.job(job_id) == before


async def test_a_fenced_exit_is_a_lost_attempt_and_the_job_resumes(
        live: Live, agent_factory: Factory) -> None:
    """The attempt stopped itself, cut off for nearly the loss window: whatever its exit code,
    its node is as good as lost and the work resumes elsewhere."""
    exchange = live.exchange
    agent: FakeAgent = await agent_factory("first")
    job_id, attempt = await place_job(exchange, agent)
    await agent.event(job_id, attempt, "started", pid=1)
    await agent.event(job_id, attempt, "exited", exit_code=0, fenced=True,
                      reason="stopped itself")
    job = await exchange.job(job_id)  # placed again at once (here: the same free node)
    assert [a["state"] for a in job["attempts"]] == ["LOST", "SCHEDULED"]
    assert "stopped itself" in job["attempts"][0]["reason"]
    assert (await exchange.job_row(job_id)).resume


async def test_a_stale_attempt_that_starts_is_told_to_stop(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    job_id, first, _ = await _move_to_second_attempt(exchange, agent_factory)
    await first.event(job_id, 1, "started", pid=9)
    cancel = await first.expect("cancel_job", job_id=job_id)
    assert (cancel["attempt"], cancel["stale"], cancel["grace_s"]) == (1, True, 0)
    await first.heartbeat(running=[(job_id, 1)])
    again = await first.expect("cancel_job", job_id=job_id)
    assert (again["attempt"], again["stale"]) == (1, True)
    assert (await exchange.job(job_id))["state"] == "SCHEDULED"


async def test_an_attempt_missing_from_a_heartbeat_is_lost(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent)
    await agent.heartbeat(running=[])  # not acknowledged yet: the start may be in flight
    assert (await exchange.job(job_id))["state"] == "SCHEDULED"
    await agent.event(job_id, attempt, "accepted")
    await agent.heartbeat(running=[(job_id, attempt)])
    assert (await exchange.job(job_id))["state"] == "STARTING"
    await agent.event(job_id, attempt, "started", pid=3)
    await agent.heartbeat(running=[])
    job = await exchange.job(job_id)
    assert (job["state"], job["node_id"]) == ("PENDING", None)
    assert job["attempts"][0]["state"] == "LOST"
    assert "no longer has it" in job["attempts"][0]["reason"]
    row = await exchange.job_row(job_id)
    assert (row.avoid_nodes, row.retries_used) == ([agent.node_id], 1)
    await exchange.tick()  # nothing else fits: the avoided node is used again
    start = await agent.expect("start_job", job_id=job_id)
    assert start["attempt"] == 2


async def test_cancelling_a_running_job_asks_its_node(live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent)
    await agent.event(job_id, attempt, "started", pid=5)
    response = await exchange.client.post(f"/api/v1/jobs/{job_id}/cancel")
    assert (response.json()["state"], response.json()["cancel_requested"]) == ("RUNNING", True)
    cancel = await agent.expect("cancel_job", job_id=job_id)
    assert (cancel["attempt"], cancel["stale"], cancel["grace_s"]) == (attempt, False, 10)
    await exchange.client.post(f"/api/v1/jobs/{job_id}/cancel")  # asked once only
    await agent.barrier()
    assert agent.received("cancel_job") == []
    await agent.event(job_id, attempt, "exited", exit_code=-15, signal=15)
    job = await exchange.job(job_id)
    assert (job["state"], job["attempts"][0]["state"]) == ("CANCELLED", "CANCELLED")
    assert "cancel" in [e["kind"] for e in await exchange.events(job_id)]


async def test_a_job_cancelled_while_running_is_cancelled_even_if_it_exits_zero(
        live: Live, agent_factory: Factory) -> None:
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(live.exchange, agent)
    await agent.event(job_id, attempt, "started", pid=5)
    await live.exchange.client.post(f"/api/v1/jobs/{job_id}/cancel")
    await agent.event(job_id, attempt, "exited", exit_code=0)
    assert (await live.exchange.job(job_id))["state"] == "CANCELLED"


async def test_a_cancel_for_a_disconnected_node_is_sent_when_it_returns(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent)
    await agent.event(job_id, attempt, "started", pid=5)
    await agent.close()
    await exchange.client.post(f"/api/v1/jobs/{job_id}/cancel")
    await agent.connect(running=[(job_id, attempt)])
    cancel = await agent.expect("cancel_job", job_id=job_id)
    assert (cancel["attempt"], cancel["stale"]) == (attempt, False)
    await agent.event(job_id, attempt, "exited", exit_code=-15, signal=15)
    assert (await exchange.job(job_id))["state"] == "CANCELLED"


async def test_each_attempt_is_billed_at_its_placement_price(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent)
    await agent.event(job_id, attempt, "started", pid=3, time=exchange.clock())
    exchange.clock.advance(1800)
    await agent.heartbeat(running=[])  # the node lost it after half an hour
    await exchange.tick()
    await agent.expect("start_job", job_id=job_id)
    await agent.event(job_id, 2, "started", pid=4, time=exchange.clock())
    exchange.clock.advance(900)
    running = await exchange.job(job_id)
    first, second = running["attempts"]
    price = first["price_per_hour"]
    assert price is not None and price > 0 and second["price_per_hour"] == price
    assert first["cost"] == pytest.approx(price * 0.5)
    assert running["cost"] == pytest.approx(price * 0.75)  # the running attempt so far
    await agent.event(job_id, 2, "exited", exit_code=0)
    done = await exchange.job(job_id)
    assert done["attempts"][1]["cost"] == pytest.approx(price * 0.25)
    assert done["cost"] == pytest.approx(price * 0.75)
    listed = (await exchange.job_row(job_id)).cost
    assert listed == pytest.approx(price * 0.75)
