"""Two projects on one exchange: for every route of the API, a token of another project gets
403 or 404 and learns nothing of the first project's jobs, nodes, bundles, tokens or secrets:
no id, no name, no count. Routes are read from the app, so a new route is covered by this
matrix as soon as it exists (``route_requests`` must be taught its path parameters)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_agent import FakeAgent
from route_requests import QUERIES, path_params, request_for, routes
from server_harness import Exchange, Live, capabilities, open_exchange

from bourse.server.dataplane import DataPlane
from bourse.server.db.schema import Node
from bourse.storage import MemoryIssuer, MemoryStore, StoreSettings

pytestmark = pytest.mark.anyio

ALPHA_CODE = b"alpha's private code"
ALPHA_SHA = hashlib.sha256(ALPHA_CODE).hexdigest()
ALPHA_OUT = "s3://bourse/data/alpha-out-6c2/"
# What another project may get besides 403/404, and why it is no leak.
NOT_REFUSED = {
    ("POST", "/api/v1/jobs"): "submits into the caller's own project",
    ("POST", "/api/v1/jobs/batch"): "submits into the caller's own project",
    ("POST", "/api/v1/offers"): "the public market: other projects' nodes under opaque ids",
    ("PUT", "/api/v1/bundles/{sha256}"): "an upload proves the caller holds the bytes",
    ("POST", "/api/v1/enrollments"): "a provider enrols into its own project",
    ("POST", "/api/v1/agent/enroll"): "spends an enrolment token; a user token is 401",
    ("PUT", "/api/v1/secrets/{name}"): "sets a secret of the caller's own project",
}


@pytest.fixture
async def exchange(database_url: str, tmp_path: Path) -> AsyncIterator[Exchange]:
    """An exchange with a store (in memory), so that data is part of the matrix."""
    store = MemoryStore("bourse")
    await store.put("data/alpha-out-6c2/alpha-weights-1e9.bin", b"alpha-weights-1e9")
    plane = DataPlane(StoreSettings(endpoint="http://store.test:8333"), "bourse",
                      MemoryIssuer(), store=store)
    async with open_exchange(tmp_path, database_url, dataplane=plane) as opened:
        yield opened


@dataclass
class Alpha:
    """The victim project's resources: path parameters and the strings that must not leak."""

    ids: dict[str, str]
    replicas: list[str]  # its service's replicas' jobs
    markers: set[str]


def _auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def _alpha(exchange: Exchange) -> Alpha:
    member = _auth(await exchange.project_token("alpha-corp"))
    provider = _auth(await exchange.project_token("alpha-corp", "provider"))
    client = exchange.client
    put = await client.put(f"/api/v1/bundles/{ALPHA_SHA}", content=ALPHA_CODE, headers=member)
    assert put.status_code == 201, put.text
    job = await client.post("/api/v1/jobs", headers=member, json={
        "command": ["true"], "name": "alpha-job-name-91c", "bundle": ALPHA_SHA,
        "run": "r-alpha-run-5e1", "app": "alpha_app.py", "stage": "Train",
        "outputs": {"model": ALPHA_OUT}})
    assert job.status_code == 201, job.text
    await client.post(f"/api/v1/jobs/{job.json()['id']}/cancel", headers=member)
    made = await client.post("/api/v1/enrollments", json={}, headers=provider)
    node = await client.post("/api/v1/agent/enroll", json={"name": "alpha-node-name-7f3"},
                             headers=_auth(made.json()["token"]))
    assert node.status_code == 201, node.text
    await _online(exchange, node.json()["node_id"])
    token = await client.post("/api/v1/tokens", json={"project": "alpha-corp",
                                                      "name": "alpha-token-name-44"})
    secret = await client.put("/api/v1/secrets/ALPHA_SECRET_NAME", headers=member,
                              json={"value": "alpha-secret-value-0d2"})
    assert secret.status_code == 201, secret.text
    grant = await client.post("/api/v1/data/credentials", headers=member,
                              json={"write": [ALPHA_OUT + "more/"]})
    assert grant.status_code == 201, grant.text
    tracked = await _tracked(exchange, member)
    service = await client.post("/api/v1/services", headers=member, json={
        "name": "alpha-svc-name-3a1", "job": {"command": ["true"], "bundle": ALPHA_SHA},
        "policy": {"port": 18000}})
    assert service.status_code == 200, service.text
    ids = {**tracked, "service": "alpha-svc-name-3a1", "grant_id": grant.json()["id"],
           "job_id": job.json()["id"], "node_id": node.json()["node_id"], "sha256": ALPHA_SHA,
           "token_id": token.json()["id"], "name": "ALPHA_SECRET_NAME",
           "run_id": "r-alpha-run-5e1", "uri": ALPHA_OUT, "project": "alpha-corp"}
    markers = {*ids.values(), "alpha-job-name-91c", "alpha-node-name-7f3", "alpha-corp",
               "alpha-token-name-44", "alpha-secret-value-0d2", "alpha-weights-1e9",
               "alpha-experiment-2c8", "alpha-param-value-6d1", "alpha artifact 9e4"}
    shown = (await client.get("/api/v1/jobs", headers=member)).json()["jobs"]
    replicas = [j["id"] for j in shown if j["id"] != ids["job_id"]]
    return Alpha(ids=ids, replicas=replicas, markers=markers)


async def _tracked(exchange: Exchange, member: dict[str, str]) -> dict[str, str]:
    """Alpha's experiment and tracking run, with a param, a curve and an artifact."""
    api = "/api/2.0/mlflow"
    made = await exchange.client.post(f"{api}/experiments/create", headers=member,
                                      json={"name": "alpha-experiment-2c8"})
    assert made.status_code == 200, made.text
    experiment = made.json()["experiment_id"]
    run = await exchange.client.post(f"{api}/runs/create", headers=member,
                                     json={"experiment_id": experiment})
    run_id = run.json()["run"]["info"]["run_id"]
    logged = await exchange.client.post(f"{api}/runs/log-batch", headers=member, json={
        "run_id": run_id, "params": [{"key": "p", "value": "alpha-param-value-6d1"}],
        "metrics": [{"key": "alpha-key-8f1", "value": 0.5, "timestamp": 1, "step": 1}]})
    assert logged.status_code == 200, logged.text
    path = f"{experiment}/{run_id}/artifacts/a.txt"
    put = await exchange.client.put(f"/api/2.0/mlflow-artifacts/artifacts/{path}",
                                    content=b"alpha artifact 9e4", headers=member)
    assert put.status_code == 200, put.text
    return {"tracking_run": run_id, "experiment": experiment, "path": path,
            "key": "alpha-key-8f1"}


async def _online(exchange: Exchange, node_id: str) -> None:
    """The node as a connected agent would leave it, so that the market offers it."""
    async with exchange.state.db.write() as session:
        node = await session.get(Node, node_id)
        assert node is not None
        node.state, node.session, node.last_seen = "online", "s-alpha", exchange.clock()
        node.capabilities = capabilities(cpus=4).model_dump(mode="json")


def _leaks(response: httpx.Response, request: dict[str, Any], alpha: Alpha) -> set[str]:
    """Alpha's markers in the answer, except those the caller sent itself."""
    sent = str(request)
    return {m for m in alpha.markers if m in response.text and m not in sent}


async def _reads(exchange: Exchange, headers: dict[str, str],
                 ids: dict[str, str]) -> dict[tuple[str, str], tuple[int, str]]:
    """Every GET of the API: its status and body, to compare before and after."""
    found = {}
    for method, path in routes(exchange):
        if method != "GET" or path.endswith("/follow"):
            continue
        response = await exchange.client.request(**request_for(method, path, ids),
                                                 headers=headers)
        found[(method, path)] = (response.status_code, response.text)
    return found


@pytest.mark.parametrize("role", ["member", "provider"])
async def test_another_project_learns_nothing_on_any_route(exchange: Exchange,
                                                           role: str) -> None:
    beta = _auth(await exchange.project_token("beta-labs", role))
    placeholder = {name: f"x-{name}" if name != "sha256" else "0" * 64
                   for method, path in routes(exchange) for name in path_params(path)}
    before = await _reads(exchange, beta, placeholder)
    alpha = await _alpha(exchange)
    after = await _reads(exchange, beta, placeholder)
    assert before == after  # lists and counts do not move when alpha acts
    assert len(before) >= 6
    sent: list[dict[str, Any]] = []
    for method, path in routes(exchange):
        request = request_for(method, path, alpha.ids, bundle=b"beta's guess")
        sent.append(request)
        response = await exchange.client.request(**request, headers=beta)
        where = (method, path, response.status_code, response.text[:300])
        if path == "/api/v1/audit":  # beta's own trail holds what beta sent before
            assert {r["project"] for r in response.json()["records"]} == {"beta-labs"}
            request = {"sent": sent}
        assert not _leaks(response, request, alpha), where
        assert response.status_code < 500, where
        names = path_params(path) or (method, path) in QUERIES
        if names and (method, path) not in NOT_REFUSED:  # names alpha's thing
            assert response.status_code in (401, 403, 404), where
    await _alpha_intact(exchange, alpha)


async def _alpha_intact(exchange: Exchange, alpha: Alpha) -> None:
    """Nothing beta did changed alpha's things."""
    member = _auth(await exchange.project_token("alpha-corp"))
    job = await exchange.client.get(f"/api/v1/jobs/{alpha.ids['job_id']}", headers=member)
    assert job.json()["name"] == "alpha-job-name-91c"
    listed = await exchange.client.get("/api/v1/secrets", headers=member)
    assert [s["name"] for s in listed.json()["secrets"]] == ["ALPHA_SECRET_NAME"]
    tokens = (await exchange.client.get("/api/v1/tokens")).json()["tokens"]
    mine = next(t for t in tokens if t["id"] == alpha.ids["token_id"])
    assert mine["revoked_at"] is None


async def test_the_market_hides_other_projects_nodes(exchange: Exchange) -> None:
    alpha = await _alpha(exchange)
    beta = _auth(await exchange.project_token("beta-labs"))
    mine = await exchange.client.post("/api/v1/offers", json={"explain": True},
                                      headers=_auth(await exchange.project_token("alpha-corp")))
    theirs = await exchange.client.post("/api/v1/offers", json={"explain": True}, headers=beta)
    assert [o["node_id"] for o in mine.json()["offers"]] == [alpha.ids["node_id"]]
    (offer,) = theirs.json()["offers"]
    assert offer["node_id"] is None and offer["id"].startswith("o-")
    assert offer["cpus"] == 4  # what is for sale is public
    assert not _leaks(theirs, {}, alpha)


async def test_a_project_sees_its_own_and_an_admin_sees_all(exchange: Exchange) -> None:
    alpha = await _alpha(exchange)
    member = _auth(await exchange.project_token("alpha-corp"))
    jobs = (await exchange.client.get("/api/v1/jobs", headers=member)).json()["jobs"]
    assert sorted(j["id"] for j in jobs) == sorted([alpha.ids["job_id"], *alpha.replicas])
    own = await exchange.client.get(f"/api/v1/bundles/{ALPHA_SHA}", headers=member)
    assert own.content == ALPHA_CODE
    nodes = (await exchange.client.get("/api/v1/nodes", headers=member)).json()["nodes"]
    assert [n["name"] for n in nodes] == ["alpha-node-name-7f3"]
    await exchange.submit()  # the admin's, in the default project
    everything = (await exchange.client.get("/api/v1/jobs")).json()["jobs"]
    assert len(everything) == 2 + len(alpha.replicas)


async def test_a_bundle_uploaded_by_two_projects_is_shared_only_by_them(
        exchange: Exchange) -> None:
    await _alpha(exchange)
    beta = _auth(await exchange.project_token("beta-labs"))
    url = f"/api/v1/bundles/{ALPHA_SHA}"
    assert (await exchange.client.head(url, headers=beta)).status_code == 404
    refused = await exchange.client.post("/api/v1/jobs", headers=beta,
                                         json={"command": ["true"], "bundle": ALPHA_SHA})
    assert refused.status_code == 422 and "has not been uploaded" in refused.json()["error"]
    put = await exchange.client.put(url, content=ALPHA_CODE, headers=beta)
    assert put.status_code == 201
    assert (await exchange.client.head(url, headers=beta)).status_code == 200


async def test_a_revoked_token_is_refused_at_once(exchange: Exchange) -> None:
    made = await exchange.client.post("/api/v1/tokens", json={"project": "default"})
    headers = _auth(made.json()["token"])
    assert (await exchange.client.get("/api/v1/jobs", headers=headers)).status_code == 200
    revoked = await exchange.client.delete(f"/api/v1/tokens/{made.json()['id']}")
    assert revoked.json()["revoked_at"] == exchange.clock()
    refused = await exchange.client.get("/api/v1/jobs", headers=headers)
    assert refused.status_code == 401 and "revoked" in refused.json()["error"]


async def test_tokens_are_listed_without_secrets_and_expire(exchange: Exchange) -> None:
    await exchange.client.post("/api/v1/projects", json={"name": "gamma"})
    made = await exchange.client.post("/api/v1/tokens", json={
        "project": "gamma", "role": "provider", "expires_in_s": 60})
    assert made.status_code == 201 and made.json()["expires_at"] == exchange.clock() + 60
    secret = made.json()["token"]
    listed = await exchange.client.get("/api/v1/tokens")
    assert secret not in listed.text
    row = next(t for t in listed.json()["tokens"] if t["id"] == made.json()["id"])
    assert (row["project"], row["role"]) == ("gamma", "provider")
    exchange.clock.advance(60)
    expired = await exchange.client.get("/api/v1/jobs", headers=_auth(secret))
    assert expired.status_code == 401 and "expired" in expired.json()["error"]


@pytest.mark.parametrize("body, status", [
    ({"project": "nowhere"}, 404), ({"project": "Bad Name"}, 422), ({"role": "root"}, 422),
    ({"expires_in_s": 0}, 422)])
async def test_token_requests_are_validated(exchange: Exchange, body: dict[str, Any],
                                            status: int) -> None:
    response = await exchange.client.post("/api/v1/tokens", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]


async def test_only_admins_manage_projects_and_tokens(exchange: Exchange) -> None:
    member = _auth(await exchange.project_token("alpha-corp"))
    for method, url, body in (("POST", "/api/v1/projects", {"name": "mine"}),
                              ("POST", "/api/v1/tokens", {"project": "alpha-corp"}),
                              ("GET", "/api/v1/tokens", None)):
        response = await exchange.client.request(method, url, json=body, headers=member)
        assert response.status_code == 403, (url, response.text)
        assert response.json()["hint"].startswith("ask an admin"), response.text
    own = await exchange.client.get("/api/v1/projects", headers=member)
    assert [p["name"] for p in own.json()["projects"]] == ["alpha-corp"]
    taken = await exchange.client.post("/api/v1/projects", json={"name": "alpha-corp"})
    assert taken.status_code == 409


async def test_enrolment_tokens_enrol_into_a_project(exchange: Exchange) -> None:
    await exchange.project_token("alpha-corp")
    provider = _auth(await exchange.project_token("beta-labs", "provider"))
    refused = await exchange.client.post("/api/v1/enrollments", headers=provider,
                                         json={"project": "alpha-corp"})
    assert refused.status_code == 403
    made = await exchange.client.post("/api/v1/enrollments", json={"project": "alpha-corp"})
    node = await exchange.client.post("/api/v1/agent/enroll", json={"name": "given"},
                                      headers=_auth(made.json()["token"]))
    member = _auth(await exchange.project_token("alpha-corp"))
    listed = await exchange.client.get("/api/v1/nodes", headers=member)
    assert [n["id"] for n in listed.json()["nodes"]] == [node.json()["node_id"]]
    nowhere = await exchange.client.post("/api/v1/enrollments", json={"project": "nowhere"})
    assert nowhere.status_code == 404


async def test_costs_are_summed_per_project(live: Live,
                                            agent_factory: Callable[..., Any]) -> None:
    exchange = live.exchange
    alpha = _auth(await exchange.project_token("alpha-corp"))
    beta = _auth(await exchange.project_token("beta-labs"))
    agent: FakeAgent = await agent_factory("shared")
    job = await exchange.client.post("/api/v1/jobs", headers=alpha, json={
        "command": ["true"], "compute": {"cpus": 1}})
    await exchange.tick()
    start = await agent.expect("start_job", job_id=job.json()["id"])
    await agent.run_job(job.json()["id"], int(start["attempt"]))
    mine = await exchange.client.get("/api/v1/cost", params={"by": "job"}, headers=alpha)
    theirs = await exchange.client.get("/api/v1/cost", params={"by": "job"}, headers=beta)
    assert [r["key"] for r in mine.json()["rows"]] == [job.json()["id"]]
    assert theirs.json()["rows"] == [] and theirs.json()["total"]["attempts"] == 0
    by_node = await exchange.client.get("/api/v1/cost", params={"by": "node"}, headers=alpha)
    assert [r["key"] for r in by_node.json()["rows"]] == [agent.node_id]  # not its name
    by_project = await exchange.client.get("/api/v1/cost", params={"by": "project"})  # admin
    rows = {r["key"]: r["attempts"] for r in by_project.json()["rows"]}
    assert rows == {"alpha-corp": 1}
    own = await exchange.client.get("/api/v1/cost", params={"by": "project"}, headers=beta)
    assert own.json()["rows"] == []


async def test_another_projects_job_is_no_cursor(exchange: Exchange) -> None:
    alpha = await _alpha(exchange)
    beta = _auth(await exchange.project_token("beta-labs"))
    paged = await exchange.client.get("/api/v1/jobs", headers=beta,
                                      params={"before": alpha.ids["job_id"]})
    missing = await exchange.client.get("/api/v1/jobs", headers=beta,
                                        params={"before": "j-nosuchjob"})
    assert (paged.status_code, missing.status_code) == (404, 404)
    assert not _leaks(paged, {"before": alpha.ids["job_id"]}, alpha)
    assert "alpha" not in paged.text
