"""What the exchange measures of each node (``core.reliability``), through real routes, a real
database and fake agents on the coordinator's injected clock: connected time from hello to
goodbye (or to when a silent node was last heard), the attempts that ended there and those the
node interrupted, published in ``GET /nodes/{id}`` and ``/metrics``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from fake_agent import FakeAgent
from server_harness import Live, place_job, until_disconnected

from bourse.cli.main import cli
from bourse.core.hardware import Declared
from bourse.core.reliability import MIN_OBSERVED_S
from bourse.core.states import NodeState
from bourse.server.db.schema import Node
from bourse.server.services.liveness import grace_after_start
from bourse.server.services.reliability import WINDOW_S

pytestmark = pytest.mark.anyio
Factory = Callable[..., Any]


async def measured(live: Live, node_id: str) -> dict[str, Any]:
    answer = await live.exchange.client.get(f"/api/v1/nodes/{node_id}")
    assert answer.status_code == 200, answer.text
    reliability: dict[str, Any] = answer.json()["reliability"]
    return reliability


async def there_then_away(live: Live, agent: FakeAgent, seconds: float) -> None:
    """The node stays connected ``seconds``, then goes away for as long."""
    live.exchange.clock.advance(seconds)
    await agent.close()
    await until_disconnected(live.exchange, agent.node_id)
    live.exchange.clock.advance(seconds)


async def test_availability_is_the_connected_share_of_the_time_since_enrolment(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    t0 = exchange.clock()
    agent: FakeAgent = await agent_factory("rack-1")
    await there_then_away(live, agent, 1800)  # away for as long as it was there
    r = await measured(live, agent.node_id)
    assert r["observed_s"] == pytest.approx(exchange.clock() - t0, abs=1)
    assert r["availability"] == pytest.approx(0.5, abs=0.01)
    assert r["score"] == pytest.approx(0.5, abs=0.01)  # no attempt: nothing interrupted
    assert (r["attempts_ended"], r["attempts_interrupted"]) == (0, 0)
    await agent.connect()  # back: its time runs again from its hello
    exchange.clock.advance(3600)
    assert (await measured(live, agent.node_id))["availability"] == pytest.approx(0.75, abs=0.01)
    await agent.close()


async def test_a_young_node_has_no_score_yet(live: Live, agent_factory: Factory) -> None:
    agent: FakeAgent = await agent_factory("new")
    live.exchange.clock.advance(MIN_OBSERVED_S / 2)
    r = await measured(live, agent.node_id)
    assert r["availability"] == pytest.approx(1.0) and r["score"] is None
    await agent.close()


async def test_attempts_are_counted_and_a_lost_node_interrupted_its_own(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory("flaky", keep_alive_s=20)
    job_id, number = await place_job(exchange, agent, compute={"cpus": 1})
    await agent.event(job_id, number, "accepted")
    await agent.event(job_id, number, "started", pid=7)
    exchange.clock.advance(600)  # ten minutes of work
    await agent.event(job_id, number, "exited", exit_code=3)  # its own code failed: not the node's
    await agent.barrier()
    failed = await exchange.job(job_id)
    assert failed["state"] == "FAILED"
    second, number = await place_job(exchange, agent, compute={"cpus": 1})
    await agent.event(second, number, "accepted")
    await agent.event(second, number, "started", pid=8)
    await agent.barrier()
    heard = exchange.clock()
    exchange.clock.advance(3000)  # silent: lost, with the attempt it ran
    assert (await exchange.tick()).lost_nodes == [agent.node_id]
    r = await measured(live, agent.node_id)
    assert (r["attempts_ended"], r["attempts_interrupted"]) == (2, 1)
    assert r["work_h"] == pytest.approx((600 + 3000) / 3600, abs=0.01)
    # connected until it was last heard, not until the loss was noticed
    up = heard - (exchange.clock() - r["observed_s"])
    assert r["availability"] == pytest.approx(up / r["observed_s"], abs=0.01)
    assert r["score"] == pytest.approx(r["availability"] * 0.5, abs=0.01)
    await agent.close()


async def test_the_coordinators_downtime_counts_against_no_node(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    t0 = exchange.clock()
    agent: FakeAgent = await agent_factory("steady")
    exchange.clock.advance(1200)
    await agent.heartbeat()
    await agent.barrier()
    exchange.clock.advance(2400)  # the coordinator "was down": nobody heard the node
    async with exchange.state.db.write() as session:
        await grace_after_start(session, exchange.clock(), 30.0)
    node = await exchange.node_row(agent.node_id)
    assert node.up_since is None and node.up_s == pytest.approx(1200, abs=1)
    assert node.up_s <= exchange.clock() - t0
    await agent.close()


async def test_a_declared_sla_is_shown_beside_what_was_measured(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    promised: FakeAgent = await agent_factory("promised", declared=Declared(sla=0.995))
    plain: FakeAgent = await agent_factory("plain")
    r = await measured(live, promised.node_id)
    assert (r["declared"], r["meets_declared"]) == (0.995, None)  # not measured yet
    await there_then_away(live, promised, 1800)  # 50%: far below the 99.5% it declared
    r = await measured(live, promised.node_id)
    assert (r["declared"], r["meets_declared"]) == (0.995, False)
    assert r["score"] == pytest.approx(0.5, abs=0.01)
    assert (await measured(live, plain.node_id))["declared"] is None
    text = (await exchange.client.get("/metrics")).text
    assert f'bourse_node_declared_sla{{node="{promised.node_id}",name="promised"}} 0.995' in text
    assert f'bourse_node_declared_sla{{node="{plain.node_id}"' not in text
    await plain.close()


async def test_metrics_publish_each_nodes_record(live: Live, agent_factory: Factory) -> None:
    agent: FakeAgent = await agent_factory("scraped")
    live.exchange.clock.advance(MIN_OBSERVED_S)
    text = (await live.exchange.client.get("/metrics")).text
    labels = f'{{node="{agent.node_id}",name="scraped"}}'
    assert f"bourse_node_availability{labels} 1" in text
    assert f"bourse_node_attempts_ended_total{labels} 0" in text
    assert f"bourse_node_reliability_score{labels} 1" in text
    assert "# TYPE bourse_node_attempts_interrupted_total counter" in text
    await agent.close()


async def test_the_score_is_in_offers_and_a_job_can_ask_for_one(
        live: Live, agent_factory: Factory) -> None:
    """The scheduler stores each node's score (every minute); live offers carry it, and a job
    with ``min_reliability`` goes only to a node that reached it, and waits saying why when
    none has."""
    exchange = live.exchange
    steady: FakeAgent = await agent_factory("steady")
    exchange.clock.advance(MIN_OBSERVED_S)
    newcomer: FakeAgent = await agent_factory("newcomer")
    await steady.heartbeat()  # heard now: not silent for the hour just gone
    await steady.barrier()
    await exchange.tick()  # the first full pass stores the scores
    assert (await exchange.node_row(steady.node_id)).reliability == 1.0
    assert (await exchange.node_row(newcomer.node_id)).reliability is None
    answer = await exchange.client.post("/api/v1/offers", json={
        "compute": {"min_reliability": "99%"}})
    assert [o["node_id"] for o in answer.json()["offers"]] == [steady.node_id]
    assert answer.json()["offers"][0]["sla"] == 1.0
    job_id, _ = await place_job(exchange, steady, compute={"cpus": 1, "min_reliability": 0.99})
    assert (await exchange.job(job_id))["node_id"] == steady.node_id
    # the steady node is busy; the newcomer has room, but no record yet
    waiting = await exchange.submit(compute={"cpus": 2, "min_reliability": 0.99})
    await exchange.tick()
    job = await exchange.job(waiting["id"])
    assert job["state"] == "PENDING" and "reliability" in (job["pending_reason"] or ""), job
    await steady.close()
    await newcomer.close()


async def test_a_bad_min_reliability_is_refused_at_submit(live: Live) -> None:
    answer = await live.exchange.client.post("/api/v1/jobs", json={
        "command": ["true"], "compute": {"min_reliability": "sometimes"}})
    assert answer.status_code == 422 and "min_reliability" in answer.text


async def test_each_providers_nodes_are_measured_together_beside_what_it_declared(
        live: Live, agent_factory: Factory) -> None:
    exchange = live.exchange
    steady: FakeAgent = await agent_factory("rack-a", provider="rack",
                                            declared=Declared(sla=0.99))
    flaky: FakeAgent = await agent_factory("rack-b", provider="rack",
                                           declared=Declared(sla=0.99))
    plain: FakeAgent = await agent_factory("lone")  # its agent named no provider
    gone: FakeAgent = await agent_factory("old", provider="rack")
    await gone.close()
    await until_disconnected(exchange, gone.node_id)
    async with exchange.state.db.write() as session:  # silent for long: out of the window
        node = await session.get(Node, gone.node_id)
        assert node is not None
        node.state, node.last_seen = NodeState.LOST.value, exchange.clock() - WINDOW_S - 1
    await there_then_away(live, flaky, 1800)  # half of its hour connected, the other all of it
    answer = await exchange.client.get("/api/v1/providers")
    assert answer.status_code == 200, answer.text
    found = {p["provider"]: p for p in answer.json()["providers"]}
    assert sorted(found) == ["node", "rack"] and found["rack"]["nodes"] == 2
    rack = found["rack"]["reliability"]
    assert rack["observed_s"] == pytest.approx(7200, abs=10)
    assert rack["availability"] == pytest.approx(0.75, abs=0.01)
    assert rack["score"] == pytest.approx(0.75, abs=0.01)
    assert (rack["declared"], rack["meets_declared"]) == (0.99, False)
    assert found["node"]["reliability"]["declared"] is None
    text = (await exchange.client.get("/metrics")).text
    figure = re.search(r'^bourse_provider_availability\{provider="rack"\} (\S+)$', text, re.M)
    assert figure is not None and float(figure.group(1)) == pytest.approx(0.75, abs=0.01)
    assert 'bourse_provider_declared_sla{provider="rack"} 0.99' in text
    assert 'bourse_provider_declared_sla{provider="node"}' not in text
    said = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(
        cli, ["nodes", "providers"], env={"BOURSE_URL": live.http_url,
                                         "BOURSE_TOKEN": exchange.admin_token}))
    assert said.exit_code == 0, said.output
    line = next(row for row in said.output.splitlines() if row.startswith("rack"))
    assert line.split()[1:4] == ["2", "2.0", "h"] and "75.0%" in line
    assert "99.0% (missed)" in line
    await steady.close()
    await plain.close()
