"""``POST /api/v1/data/credentials``: a user's own short-lived store key, scoped to what the
caller asked and its project may touch (claims and homes as for jobs), audited without its
secret, revoked on request and swept at expiry; ``GET /data/home``; and jobs that would write
to a bucket that does not exist are refused at submit, not after training."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from server_harness import Exchange, job_spec

from bourse.core.uri import StoreURI
from bourse.storage import MemoryIssuer, MemoryStore, ObjectNotFound

pytestmark = pytest.mark.anyio
HOME = "s3://bourse/projects/alpha-corp/"


@pytest.fixture
def exchange(store_exchange: Exchange) -> Exchange:
    return store_exchange


async def _headers(exchange: Exchange, project: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {await exchange.project_token(project)}"}


async def _grant(exchange: Exchange, headers: dict[str, str], **body: Any) -> httpx.Response:
    return await exchange.client.post("/api/v1/data/credentials", json=body, headers=headers)


def _issuer(exchange: Exchange) -> MemoryIssuer:
    plane = exchange.state.dataplane
    assert plane is not None and isinstance(plane.issuer, MemoryIssuer)
    return plane.issuer


async def test_a_grant_reads_and_writes_what_was_asked_and_nothing_else(
        exchange: Exchange) -> None:
    alpha = await _headers(exchange, "alpha-corp")
    home = (await exchange.client.get("/api/v1/data/home", headers=alpha)).json()
    response = await _grant(exchange, alpha, read=["s3://datasets/digits/"],
                            write=[HOME + "model/"], ttl_s=600)
    assert response.status_code == 201, response.text
    grant = response.json()
    key, issuer = grant["store"]["access_key_id"], _issuer(exchange)

    assert home == {"store": "s3://bourse/", "home": HOME, "project": "alpha-corp"}
    assert grant["store"]["endpoint"] == "http://store.test:8333"
    assert issuer.allows(key, "read", "s3://datasets/digits/0.png")
    assert issuer.allows(key, "write", HOME + "model/w.pt")
    assert not issuer.allows(key, "write", "s3://datasets/digits/0.png")
    assert not issuer.allows(key, "read", HOME + "other/x")
    expires = datetime.fromtimestamp(grant["store"]["expires_at"], UTC)
    assert timedelta(seconds=590) < expires - datetime.now(UTC) <= timedelta(seconds=600)
    records = (await exchange.client.get("/api/v1/audit")).json()["records"]
    asked = [r for r in records if r["action"] == "POST /api/v1/data/credentials"]
    assert asked and HOME + "model/" in str(asked[-1])
    assert grant["store"]["secret_access_key"] not in str(records)


async def test_a_grant_expires_and_can_be_revoked_by_its_project_only(
        exchange: Exchange) -> None:
    alpha, beta = await _headers(exchange, "alpha-corp"), await _headers(exchange, "beta-labs")
    first = (await _grant(exchange, alpha, write=[HOME + "a/"], ttl_s=60)).json()
    second = (await _grant(exchange, alpha, write=[HOME + "b/"], ttl_s=3600)).json()
    issuer, plane = _issuer(exchange), exchange.state.dataplane
    assert plane is not None

    await plane.tick(datetime.now(UTC) + timedelta(seconds=61))
    theirs = await exchange.client.delete(f"/api/v1/data/credentials/{second['id']}",
                                          headers=beta)
    assert issuer.allows(second["store"]["access_key_id"], "write", HOME + "b/x")
    mine = await exchange.client.delete(f"/api/v1/data/credentials/{second['id']}",
                                        headers=alpha)

    assert not issuer.allows(first["store"]["access_key_id"], "write", HOME + "a/x")
    assert theirs.status_code == 404 and mine.status_code == 204
    assert not issuer.allows(second["store"]["access_key_id"], "write", HOME + "b/x")


@pytest.mark.parametrize(("body", "status", "says"), [
    ({}, 422, "at least one URI"),
    ({"read": ["gs://bourse/x/"]}, 422, "is not an s3:// URI"),
    ({"read": ["s3://bourse/"]}, 422, "names a whole bucket"),
    ({"read": ["s3://bourse/logs/j-1.jsonl.gz"]}, 422, "keeps for itself"),
    ({"write": ["s3://bourse/jobs/j-1/x/"]}, 422, "keeps for itself"),
    ({"read": ["s3://bourse/tracking/"]}, 422, "keeps for itself"),
    ({"read": ["s3://bourse/tracking/beta-labs/r-1/model.pt"]}, 422, "keeps for itself"),
    ({"write": ["s3://bourse/tracking/alpha-corp/r-1/"]}, 422, "keeps for itself"),
    ({"read": ["s3://bourse/projects/"]}, 422, "every project's home"),
    ({"write": ["s3://bourse/projects/beta-labs/x/"]}, 403, "belongs to another project"),
    ({"read": ["s3://bourse/projects/beta-labs/x/"]}, 403, "belongs to another project"),
    ({"read": ["s3://x/"], "ttl_s": 5}, 422, "ttl_s"),
])
async def test_what_cannot_be_granted_is_refused_saying_why(
        exchange: Exchange, body: dict[str, Any], status: int, says: str) -> None:
    response = await _grant(exchange, await _headers(exchange, "alpha-corp"), **body)

    assert response.status_code == status, response.text
    assert says in response.text


async def test_what_a_grant_writes_is_its_projects(exchange: Exchange) -> None:
    alpha, beta = await _headers(exchange, "alpha-corp"), await _headers(exchange, "beta-labs")
    assert (await _grant(exchange, alpha, write=["s3://datasets/alpha/"])).status_code == 201

    read = await _grant(exchange, beta, read=["s3://datasets/alpha/x"])
    job = await exchange.client.post("/api/v1/jobs", headers=beta, json=job_spec(
        inputs={"d": "s3://datasets/alpha/"}))
    shared = await _grant(exchange, beta, read=["s3://datasets/shared/"])

    assert read.status_code == 403 and job.status_code == 403
    assert shared.status_code == 201  # data nobody claimed stays readable


async def test_a_job_writing_to_a_missing_bucket_is_refused_at_submit(
        exchange: Exchange) -> None:
    plane = exchange.state.dataplane
    assert plane is not None
    gone = plane.stores(StoreURI("s3", "no-such-bucket", ""))
    assert isinstance(gone, MemoryStore)
    gone.fail("probe", ObjectNotFound("s3://no-such-bucket/ does not exist"), times=5)

    refused = await exchange.client.post("/api/v1/jobs", json=job_spec(
        outputs={"model": "s3://no-such-bucket/m/"}))
    granted = await _grant(exchange, {}, write=["s3://no-such-bucket/x/"])
    accepted = await exchange.client.post("/api/v1/jobs", json=job_spec(
        outputs={"model": "s3://results/m/"}, checkpoint="s3://results/ckpt/"))

    assert refused.status_code == 422, refused.text
    body = refused.json()
    assert body["field"] == "outputs.model" and "does not exist" in body["error"]
    assert "s3://bourse/projects/default/" in body["hint"]
    assert granted.status_code == 422 and "does not exist" in granted.text
    assert accepted.status_code == 201, accepted.text
