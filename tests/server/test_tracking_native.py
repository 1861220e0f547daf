"""``track`` messages from an agent land in the job's run, once: replays (the same seq again,
after a reconnect) and records of attempts that did not run on the sending node are dropped,
and a second attempt continues the run's step axis."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Live, place_job

from bourse.protocol.track import TrackBatch

pytestmark = [pytest.mark.anyio,
              pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]


def batch(job_id: str, seq: int, steps: range, attempt: int = 1, **extra: Any) -> TrackBatch:
    return TrackBatch(job_id=job_id, attempt=attempt, seq=seq, time=1.0,
                      metrics=[("loss", 1.0 / (s + 1), s, 1000 + s) for s in steps], **extra)


async def test_track_records_are_stored_once_in_the_jobs_run(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory("box", cpus=4)
    job_id, attempt = await place_job(exchange, agent)
    other: FakeAgent = await agent_factory("other", cpus=4)
    await agent.send(batch(job_id, 3, range(0, 3), params={"lr": "0.1"}, tags={"t": "a"}))
    await agent.send(batch(job_id, 5, range(3, 6)))
    await agent.send(batch(job_id, 3, range(0, 3)))  # a replay after a lost ack
    await agent.send(batch(job_id, 4, range(0, 3)))  # below what was applied: a replay too
    await other.send(batch(job_id, 9, range(100, 103)))  # not this node's attempt
    await agent.send(TrackBatch(job_id=job_id, attempt=attempt, seq=6, time=1.0,
                                params={"lr": "0.2"}))  # refused by the run, dropped
    await agent.send(batch(job_id, 7, range(6, 7)))  # and what follows still lands
    run = (await exchange.client.get(f"/api/v1/tracking/runs/{job_id}")).json()
    assert run["params"] == {"lr": "0.1"}
    assert run["tags"]["t"] == "a" and run["tags"][f"bourse.track.seq.{attempt}.0"] == "7"
    assert (run["metrics"]["loss"]["step"], run["metrics"]["loss"]["count"]) == (6, 7)
    curve = (await exchange.client.get(f"/api/v1/tracking/runs/{job_id}/metrics/loss")).json()
    assert [s for s, _ in curve["points"]] == list(range(7))


async def test_the_gradient_view_flags_layers_and_shows_the_graph(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory("box", cpus=4)
    job_id, attempt = await place_job(exchange, agent)
    norms = [(f"grad_norm/{layer}", value * (s + 1), s, 1000 + s)
             for s in range(10) for layer, value in (("enc", 1.0), ("dec", 1e-9), ("head", 2e2))]
    graph = '{"tree": {"type": "Net", "total": 3, "children": []}, "ops": null, "cut": false}'
    await agent.send(TrackBatch(job_id=job_id, attempt=attempt, seq=1, time=1.0,
                                metrics=norms, tags={"bourse.model_graph": graph}))
    url = f"/api/v1/tracking/runs/{job_id}/gradients"
    view = (await exchange.client.get(url, params={"columns": 5})).json()
    assert view["layers"] == ["dec", "enc", "head"] and view["steps"] == [0, 2, 4, 6, 8]
    assert view["cells"][1] == [2.0, 4.0, 6.0, 8.0, 10.0]  # the largest of each step pair
    assert view["flags"] == {"dec": "vanishing", "head": "exploding"}  # head ends at 2000
    assert view["graph"]["tree"]["type"] == "Net"
    wider = (await exchange.client.get(url, params={"high": 1e4})).json()
    assert wider["flags"] == {"dec": "vanishing"} and len(wider["steps"]) == 10
    bad = await exchange.client.get(url, params={"low": 1, "high": 0.5})
    assert bad.status_code == 422 and "must be below" in bad.text
