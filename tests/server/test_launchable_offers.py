"""``POST /offers`` with ``launchable``: what the exchange's clouds could launch now for the
caller's project, by the launcher's own rules — cheapest first, the places that failed lately
left out and named, a project's clouds kept, and a plain answer from an exchange without
clouds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from launch_harness import ScriptedCloud, launching
from server_harness import Exchange
from test_launcher import cheapest, out_of_capacity

pytestmark = pytest.mark.anyio
ON_DEMAND = {"gpu": "a100:8", "spot": "never"}


async def launchable(client: Any, compute: dict[str, Any], limit: int = 6,
                     **more: Any) -> dict[str, Any]:
    answer = await client.post("/api/v1/offers", json={
        "compute": compute, "limit": limit, "launchable": True, **more})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def places(body: dict[str, Any]) -> list[tuple[float, str, str | None, str]]:
    return [(o["price_per_hour"], o["region"], o["zone"], o["instance_type"])
            for o in body["offers"]]


async def test_the_cheapest_launchable_places_come_first(tmp_path: Path,
                                                        database_url: str) -> None:
    async with launching(tmp_path, database_url) as run:
        body = await launchable(run.exchange.client, ON_DEMAND)
        assert places(body) == cheapest(spot=False)[:6]
        assert all(o["provider"] == "aws" and o["node_id"] is None and not o["spot"]
                   for o in body["offers"])
        assert body["explanation"] is None  # nothing left out, nothing asked
        explained = await launchable(run.exchange.client, ON_DEMAND, explain=True)
        assert any("a100" in line.lower() for line in explained["explanation"])
        assert not run.cloud.calls  # asking launches nothing


async def test_places_that_failed_lately_are_left_out_and_named(tmp_path: Path,
                                                               database_url: str) -> None:
    cloud, order = out_of_capacity(2)
    async with launching(tmp_path, database_url, cloud=cloud) as run:
        await run.exchange.submit(compute=ON_DEMAND)
        await run.cycle()  # two capacity errors block their zones, the third place launched
        body = await launchable(run.exchange.client, ON_DEMAND, limit=3)
        assert places(body) == order[2:5]
        blocked = [line for line in body["explanation"] if line.startswith("blocked: ")]
        assert len(blocked) == 2 and all("InsufficientInstanceCapacity" in line or
                                         "capacity" in line for line in blocked), blocked
        assert all(f"({zone})" in " ".join(blocked) for _, _, zone, _ in order[:2])


async def test_a_project_limited_to_no_cloud_can_launch_nothing(tmp_path: Path,
                                                               database_url: str) -> None:
    async with launching(tmp_path, database_url) as run:
        await run.exchange.client.patch("/api/v1/projects/default/limits", json={"clouds": []})
        body = await launchable(run.exchange.client, ON_DEMAND)
        assert body["offers"] == []
        assert "this project may launch only on no cloud" in body["explanation"]


async def test_a_cloud_that_failed_its_check_is_named(tmp_path: Path, database_url: str) -> None:
    cloud = ScriptedCloud()
    async with launching(tmp_path, database_url, cloud=cloud) as run:
        run.launcher.clouds.disable("aws", "AuthFailure: the credentials were refused")
        body = await launchable(run.exchange.client, ON_DEMAND)
        assert body["offers"] == []
        assert "cloud aws: disabled (AuthFailure: the credentials were refused)" in \
            body["explanation"]


async def test_an_exchange_without_clouds_says_so(exchange: Exchange) -> None:
    body = await launchable(exchange.client, ON_DEMAND)
    assert body["offers"] == []
    [line] = body["explanation"]
    assert "launches on no cloud" in line and "--exchange" in line


async def test_a_bad_query_is_refused_with_the_field(exchange: Exchange) -> None:
    answer = await exchange.client.post("/api/v1/offers", json={
        "compute": ON_DEMAND, "launchable": "maybe"})
    assert answer.status_code == 422 and "launchable" in answer.text
