"""What each cloud delivered, used: a launchable offer's ``sla`` is its cloud's measured launch
success rate (read by the launcher from its launch rows), so ``bourse offers --launchable``
publishes it, placement ranks by it after price and ``min_reliability`` keeps a job off a
cloud that failed it; a cloud's declared SLA (``--cloud-sla``) reaches its launched agents."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from launch_harness import ScriptedCloud, launching
from server_harness import serve
from test_launchable_offers import launchable
from test_launcher import launched_agent

from bourse.core.compute import Compute
from bourse.market.catalogs import catalog_offers
from bourse.server.config import CloudsConfig
from bourse.server.launcher.clouds import Clouds
from bourse.server.launcher.launcher import RATE_EVERY_S

pytestmark = pytest.mark.anyio
A100 = {"gpu": "a100:8", "spot": "never"}


async def test_a_clouds_launch_success_rate_scores_its_launchable_offers(
        tmp_path: Path, database_url: str) -> None:
    async with launching(tmp_path, database_url, boot_timeout_s=300.0,
                         sla=(("aws", 0.995),)) as run, serve(run.exchange) as live:
        client = run.exchange.client
        await run.exchange.submit(compute=A100)
        await run.cycle()
        assert run.user_data[0]["declared_sla"] == 0.995  # the agent's --declare-sla
        body = await launchable(client, A100)
        assert body["offers"] and all(o["sla"] is None for o in body["offers"])  # in flight
        run.exchange.clock.advance(301)  # the first machine never enrols: a failed launch
        await run.tick()  # and the job launches again
        run.exchange.clock.advance(RATE_EVERY_S)
        agent = await launched_agent(run, live)  # the second one is delivered
        try:
            await run.tick()
            assert run.launcher.clouds.rates == {"aws": 0.5}
            body = await launchable(client, A100)
            assert body["offers"] and all(o["sla"] == 0.5 for o in body["offers"])
            picky = await launchable(client, {**A100, "min_reliability": "90%"})
            assert picky["offers"] == []
            assert any("reliab" in line for line in picky["explanation"]), picky
        finally:
            await agent.close()


async def test_a_cloud_with_no_declared_sla_launches_agents_that_declare_none(
        tmp_path: Path, database_url: str) -> None:
    async with launching(tmp_path, database_url) as run:
        await run.exchange.submit(compute=A100)
        await run.cycle()
        assert "declared_sla" not in run.user_data[0]


async def test_rates_rank_offers_of_one_price_across_clouds() -> None:
    aws = [o for o in catalog_offers(("aws",)) if o.region == "us-east-1"]
    [one] = [o for o in aws if o.instance_type == "p4d.24xlarge"][:1]
    other = [replace(one, provider="lambda", id="lambda-" + one.id)]
    clouds = Clouds({"aws": ScriptedCloud(), "lambda": ScriptedCloud(name="lambda")},
                    CloudsConfig(enabled=("aws", "lambda")),
                    offers={"aws": [one], "lambda": other})
    await clouds.check()
    compute = Compute(gpu="a100:8", spot="never")
    assert [m.offer.provider for m in clouds.matches(compute, 5)] == ["aws", "lambda"]  # by id
    index = clouds.index()
    clouds.rate({"aws": 0.4, "lambda": 0.9, "gcp": 1.0})
    assert clouds.rates == {"aws": 0.4, "lambda": 0.9}  # only its own clouds
    assert [(m.offer.provider, m.offer.sla) for m in clouds.matches(compute, 5)] == [
        ("lambda", 0.9), ("aws", 0.4)]
    again = clouds.index()
    clouds.rate({"aws": 0.4, "lambda": 0.9})
    assert clouds.index() is again is not index  # made again only when a rate changed
    clouds.rate({"aws": None, "lambda": 0.9})  # not measured any more (out of the window)
    assert [m.offer.sla for m in clouds.matches(compute, 5)] == [0.9, None]
    assert [m.offer.provider for m in clouds.matches(
        compute.model_copy(update={"min_reliability": 0.5}), 5)] == ["lambda"]
