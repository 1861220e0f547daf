"""Services through the API, in process on a real database: apply (created, unchanged,
rollout), the keeper's pass deciding with its reason (timeline and audit), rollback and stop
by hand, and the gateway's answers before any replica is ready."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result
from pydantic import ValidationError
from server_harness import Exchange, Live, job_spec

from bourse.cli.main import cli
from bourse.protocol.services import ServicePolicy
from bourse.server.serving import keeper as keeper_module
from bourse.server.serving.keeper import ServiceKeeper

POLICY = {"port": 18000, "readiness_path": "/health", "min_replicas": 2, "max_replicas": 2,
          "ready_timeout_s": 30}


def body(version: str, **policy: Any) -> dict[str, Any]:
    return {"name": "web", "job": job_spec(env={"V": version}), "policy": POLICY | policy}


async def _jobs(exchange: Exchange) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await exchange.client.get("/api/v1/jobs")).json()["jobs"]
    return found


@pytest.mark.anyio
async def test_apply_roll_out_and_roll_back_on_the_rules(exchange: Exchange) -> None:
    client = exchange.client
    made = await client.post("/api/v1/services", json=body("1"))
    assert made.status_code == 200, made.text
    view = made.json()
    assert (view["stable"], view["canary"], view["url"]) == (1, None, "/svc/default/web/")
    jobs = await _jobs(exchange)
    assert len(jobs) == 2
    specs = [(await exchange.job(j["id"]))["spec"] for j in jobs]
    assert sorted(s["env"]["PORT"] for s in specs) == ["18000", "18001"]  # one port each
    assert sorted(s["ports"][0]["number"] for s in specs) == [18000, 18001]

    again = (await client.post("/api/v1/services", json=body("1"))).json()
    assert again["canary"] is None and len(await _jobs(exchange)) == 2  # unchanged

    rollout = (await client.post("/api/v1/services", json=body("2"))).json()
    assert (rollout["stable"], rollout["canary"], rollout["step"]) == (1, 2, 0)
    assert {v["number"]: v["weight"] for v in rollout["versions"]} == {1: 90, 2: 10}
    assert len(await _jobs(exchange)) == 4

    keeper = ServiceKeeper(exchange.state)
    await keeper.run_once()
    assert (await client.get("/api/v1/services/web")).json()["canary"] == 2  # held
    exchange.clock.advance(31)
    await keeper.run_once()
    shown = (await client.get("/api/v1/services/web")).json()
    assert (shown["stable"], shown["canary"]) == (1, None)
    decision = [e for e in shown["events"] if e["kind"] == "decision"]
    assert "no replica of the new version became ready within 30 s" in decision[-1]["message"]
    states = {v["number"]: v["state"] for v in shown["versions"]}
    assert states == {1: "stable", 2: "rolled_back"}
    cancelled = [j for j in await _jobs(exchange) if j["state"] == "CANCELLED"]
    assert len(cancelled) == 2  # the canary's replicas, never placed
    records = (await client.get("/api/v1/audit", params={"limit": 1000})).json()["records"]
    assert any(r["action"] == "service.roll_back" and "became ready" in str(r["params"])
               for r in records)

    by_hand = await client.post("/api/v1/services/web/rollback")
    assert by_hand.status_code == 409 and "no rollout" in by_hand.json()["error"]


@pytest.mark.anyio
async def test_two_services_replicas_never_share_a_port(exchange: Exchange) -> None:
    """Replicas of different services may land on one node too (issue 20): the second
    service's start above the first's, and a stopped service's ports are free again."""
    client = exchange.client
    assert (await client.post("/api/v1/services", json=body("1"))).status_code == 200
    other = body("1") | {"name": "api"}
    assert (await client.post("/api/v1/services", json=other)).status_code == 200
    specs = [(await exchange.job(j["id"]))["spec"] for j in await _jobs(exchange)]
    ports = {s["name"]: set() for s in specs}
    for spec in specs:
        ports[spec["name"]].add(spec["ports"][0]["number"])
    assert ports == {"web-v1": {18000, 18001}, "api-v1": {18002, 18003}}
    assert (await client.post("/api/v1/services/web/stop")).status_code == 200
    third = body("1") | {"name": "docs"}
    assert (await client.post("/api/v1/services", json=third)).status_code == 200
    docs = [(await exchange.job(j["id"]))["spec"] for j in await _jobs(exchange)]
    assert {s["ports"][0]["number"] for s in docs if s["name"] == "docs-v1"} == {18000, 18001}


@pytest.mark.anyio
async def test_the_gateway_before_replicas_are_ready_and_after_stop(
        exchange: Exchange) -> None:
    client = exchange.client
    assert (await client.post("/api/v1/services", json=body("1"))).status_code == 200
    await ServiceKeeper(exchange.state).run_once()
    unready = await client.get("/svc/default/web/predict")
    assert unready.status_code == 503 and "no ready replica" in unready.json()["error"]
    other = await exchange.project_token("other-corp")
    foreign = await client.get("/svc/default/web/predict",
                               headers={"Authorization": f"Bearer {other}"})
    assert foreign.status_code == 404  # another project's service is as missing as none
    anonymous = await client.get("/svc/default/web/predict", headers={"Authorization": ""})
    assert anonymous.status_code == 401
    assert (await client.post("/api/v1/services/web/stop")).json()["state"] == "stopped"
    assert (await client.get("/svc/default/web/predict")).status_code == 404
    assert all(j["state"] == "CANCELLED" for j in await _jobs(exchange))


@pytest.mark.anyio
async def test_the_keeper_adds_replicas_when_the_p99_passes_its_target(
        exchange: Exchange, monkeypatch: pytest.MonkeyPatch) -> None:
    client = exchange.client
    scaled = body("1", min_replicas=1, max_replicas=4, target_p99_ms=200)
    assert (await client.post("/api/v1/services", json=scaled)).status_code == 200
    keeper = ServiceKeeper(exchange.state)
    await keeper.run_once()
    assert len(await _jobs(exchange)) == 1
    route = keeper.gateway.route("default", "web")
    assert route is not None
    now = exchange.clock()
    for i in range(50):  # the last seconds' requests: p99 about 550 ms (buckets 5 % apart)
        keeper.gateway.record(route, 1, now - 5 + i / 10, 550.0, False)
    serving = [1]  # replicas whose readiness probe answered (none run here: no agent)
    monkeypatch.setattr(keeper_module, "_serving", lambda _route, _version: serving[0])
    await keeper.run_once()
    assert len(await _jobs(exchange)) == 3  # 1 x 550 / 200, rounded up
    await keeper.run_once()  # the p99 is as high, but the new two do not serve yet
    assert len(await _jobs(exchange)) == 3
    serving[0] = 3
    await keeper.run_once()  # all three serve and the p99 is still high: up again, to max
    assert len(await _jobs(exchange)) == 4
    exchange.clock.advance(11)  # out of the rate window: no p99, the latency asks for nothing
    await keeper.run_once()
    assert len([j for j in await _jobs(exchange) if j["state"] != "CANCELLED"]) == 4  # waits


TASK = """\
name: web
run: python -m http.server $PORT
service:
  port: 18100
  readiness: /
  replicas: {min: 1, max: 2, target_p99: 300ms}
"""


@pytest.mark.anyio
async def test_serve_and_services_answer_json_for_scripts(live: Live, tmp_path: Path) -> None:
    task = tmp_path / "web.yaml"
    task.write_text(TASK)
    env = {"BOURSE_URL": live.http_url, "BOURSE_TOKEN": live.exchange.admin_token}

    async def bourse(*args: str) -> Any:
        said: Result = await anyio.to_thread.run_sync(
            lambda: CliRunner().invoke(cli, list(args), env=env))
        assert said.exit_code == 0, said.output
        return json.loads(said.stdout)

    served = await bourse("serve", str(task), "--no-code", "--json")
    assert (served["name"], served["stable"], served["url"]) == ("web", 1, "/svc/default/web/")
    [listed] = await bourse("services", "--json")
    assert listed["name"] == "web"
    shown = await bourse("services", "show", "web", "--json")
    assert shown["versions"][0]["number"] == 1
    stopped = await bourse("services", "stop", "web", "-y", "--json")
    assert stopped["state"] == "stopped"


@pytest.mark.parametrize(("policy", "words"), [
    ({"steps": [50, 10, 100]}, "must rise"),
    ({"min_replicas": 3, "max_replicas": 2}, "below min_replicas"),
    ({"port": 80}, "greater than or equal to 1024"),
])
def test_a_bad_policy_is_refused(policy: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        ServicePolicy.model_validate(POLICY | policy)
