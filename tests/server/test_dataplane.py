"""The coordinator's data plane over in-memory parts (``MemoryIssuer``, ``MemoryStore``, both
shipped for tests) and a fake agent: what a start carries, when credentials are issued,
reused, renewed and revoked, how outputs end a job, submit-time checks, and bundles in the
store. The same flows against a real SeaweedFS and real agents are in tests/dataplane."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import Exchange, Live, capabilities, open_exchange, place_job, serve, until

from bourse.protocol.agent import StartJob
from bourse.protocol.common import JobSpec
from bourse.server.dataplane import DataPlane
from bourse.server.dataplane.plan import attempt_scope, check_spec, overlaps, renewal_due
from bourse.storage import MemoryIssuer, MemoryStore, StoreSettings, parse_uri
from bourse.storage.credentials import ScopedCredentials
from bourse.storage.errors import CredentialError
from bourse.storage.memory import MemoryStores

pytestmark = pytest.mark.anyio
ROOT = parse_uri("s3://bourse/")
SETTINGS = StoreSettings(endpoint="http://store.test:8333", region="us-east-1")
DATA = {"inputs": {"data": "s3://datasets/digits/"},
        "outputs": {"model": "s3://results/run-1/model/"}}


class FlakyIssuer(MemoryIssuer):
    """Refuses to issue while ``down``."""

    down = False

    async def issue(self, *args: Any, **kwargs: Any) -> ScopedCredentials:
        if self.down:
            raise CredentialError("the store's IAM API is unreachable")
        return await super().issue(*args, **kwargs)


@pytest.fixture
def issuer() -> FlakyIssuer:
    return FlakyIssuer()


@pytest.fixture
def plane(issuer: FlakyIssuer) -> DataPlane:
    return DataPlane(SETTINGS, "bourse", issuer, store=MemoryStore("bourse"),
                     opener=MemoryStores())


@pytest.fixture
async def live(database_url: str, tmp_path: Path, plane: DataPlane) -> AsyncIterator[Live]:
    async with open_exchange(tmp_path, database_url, dataplane=plane) as exchange, \
            serve(exchange) as served:
        yield served


@pytest.fixture
async def node(live: Live) -> AsyncIterator[FakeAgent]:
    node_id, credential = await live.exchange.enroll("node")
    agent = FakeAgent(live.ws_url, node_id, credential, capabilities(), name="node")
    await agent.connect()
    yield agent
    await agent.close()


def keys(issuer: MemoryIssuer, job_id: str) -> list[str]:
    return sorted(k for k, c in issuer.active.items() if c.job_id == job_id)


# --- the pure parts ---------------------------------------------------------------------------

@pytest.mark.parametrize(("a", "b", "expected"), [
    ("s3://bourse/jobs/", "s3://bourse/jobs/j-1/checkpoints/", True),
    ("s3://bourse/", "s3://bourse/bundles/", True),
    ("s3://bourse/jobsX/", "s3://bourse/jobs/", False),
    ("s3://bourse/jobs", "s3://bourse/jobs/", True),  # an object key covers key/ too
    ("s3://other/jobs/", "s3://bourse/jobs/", False),
])
def test_overlaps(a: str, b: str, expected: bool) -> None:
    assert overlaps(parse_uri(a), parse_uri(b)) is expected
    assert overlaps(parse_uri(b), parse_uri(a)) is expected


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"inputs": {"data": "gs://bucket/x/"}}, "inputs.data", "not an s3:// URI"),
    ({"outputs": {"m": "s3://bourse/bundles/"}}, "outputs.m", "keeps for itself"),
    ({"outputs": {"m": "s3://bourse/"}}, "outputs.m", "keeps for itself"),
    ({"checkpoint": "s3://bourse/jobs/j-other/checkpoints/"}, "checkpoint", "keeps for itself"),
    ({"outputs": {"m": "s3://bourse/logs/j-1.jsonl.gz"}}, "outputs.m", "keeps for itself"),
    ({"outputs": {"m": "s3://bourse/runs/"}}, "outputs.m", "app runs of every project"),
    ({"inputs": {"l": "s3://bourse/logs/j-1.jsonl.gz"}}, "inputs.l", "keeps for itself"),
    ({"inputs": {"b": "s3://bourse/bundles/"}}, "inputs.b", "keeps for itself"),
    # every project's tracked runs' artifacts: the tracking API serves them, to their project
    ({"inputs": {"t": "s3://bourse/tracking/"}}, "inputs.t", "keeps for itself"),
    ({"inputs": {"t": "s3://bourse/tracking/p-other/r-1/model.pt"}}, "inputs.t",
     "keeps for itself"),
    ({"outputs": {"t": "s3://bourse/tracking/p-other/r-1/"}}, "outputs.t", "keeps for itself"),
    ({"checkpoint": "s3://bourse/tracking/p-other/"}, "checkpoint", "keeps for itself"),
])
def test_check_spec_refuses(spec: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(Exception, match=words) as caught:
        check_spec(JobSpec(command=["x"], **spec), ROOT)
    assert getattr(caught.value, "field", None) == field


def test_check_spec_accepts_reading_the_exchange_prefixes() -> None:
    check_spec(JobSpec(command=["x"], inputs={"c": "s3://bourse/jobs/j-1/checkpoints/"}), ROOT)


def test_attempt_scope() -> None:
    spec = JobSpec(command=["x"], bundle="a" * 64, checkpoint=None, **DATA)
    scope = attempt_scope(spec, "j-1", ROOT)
    assert [str(u) for u in scope.read] == ["s3://datasets/digits/",
                                            f"s3://bourse/bundles/{'a' * 64}.tar.gz"]
    assert [str(u) for u in scope.write] == ["s3://results/run-1/model/",
                                             "s3://bourse/jobs/j-1/checkpoints/",
                                             "s3://bourse/jobs/j-1/lightning_logs/"]


def test_a_job_naming_an_output_lightning_logs_gets_no_other_place_for_them() -> None:
    spec = JobSpec(command=["x"], outputs={"lightning_logs": "s3://results/ll/"})
    assert [str(u) for u in attempt_scope(spec, "j-1", ROOT).write] == [
        "s3://results/ll/", "s3://bourse/jobs/j-1/checkpoints/"]


@pytest.mark.parametrize(("left_s", "due"), [(7200, False), (3601, False), (3600, True), (0, True)])
def test_renewal_is_due_at_half_the_lifetime(left_s: int, due: bool) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    credentials = ScopedCredentials("j", 1, "n", None, now + timedelta(seconds=left_s),  # type: ignore[arg-type]
                                    attempt_scope(JobSpec(command=["x"]), "j", ROOT))
    assert renewal_due(credentials, now, timedelta(hours=2)) is due


# --- submit -----------------------------------------------------------------------------------

async def test_without_a_store_data_is_refused_at_submit(exchange: Exchange) -> None:
    response = await exchange.client.post("/api/v1/jobs", json={
        "command": ["x"], "inputs": {"data": "s3://datasets/digits/"}})
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["field"] == "inputs.data"
    assert "no object store" in body["error"] and "--no-store" in body["hint"]
    plain = await exchange.client.post("/api/v1/jobs", json={"command": ["x"]})
    assert plain.status_code == 201
    assert plain.json()["spec"]["checkpoint"] is None


async def test_submit_fills_in_the_default_checkpoint(live: Live) -> None:
    job = await live.exchange.submit(**DATA)
    assert job["spec"]["checkpoint"] == f"s3://bourse/jobs/{job['id']}/checkpoints/"
    plain = await live.exchange.submit()  # names no data: gets no data plan at all
    assert plain["spec"]["checkpoint"] is None
    response = await live.exchange.client.post("/api/v1/jobs", json={
        "command": ["x"], "outputs": {"m": "s3://bourse/bundles/x/"}})
    assert response.status_code == 422
    assert response.json()["field"] == "outputs.m"


# --- attempts -------------------------------------------------------------------------------

async def test_a_start_carries_scoped_credentials_reused_when_sent_again(
        live: Live, node: FakeAgent, issuer: FlakyIssuer) -> None:
    job_id, attempt = await place_job(live.exchange, node, **DATA)
    [key] = keys(issuer, job_id)
    granted = issuer.active[key]
    assert [str(u) for u in granted.scope.write] == [
        "s3://results/run-1/model/", f"s3://bourse/jobs/{job_id}/checkpoints/",
        f"s3://bourse/jobs/{job_id}/lightning_logs/"]
    await node.close()  # the node comes back before it acknowledged: the start is sent again
    await node.connect()
    again = StartJob.model_validate(await node.expect("start_job", job_id=job_id))
    assert again.data is not None and again.data.store is not None
    assert again.data.store.access_key_id == key
    assert again.data.store.secret_access_key == granted.access_key.secret_access_key
    assert (again.data.store.endpoint, again.data.inputs, again.data.checkpoint) == (
        SETTINGS.endpoint, DATA["inputs"], f"s3://bourse/jobs/{job_id}/checkpoints/")
    assert again.data.lightning_logs == f"s3://bourse/jobs/{job_id}/lightning_logs/"
    assert keys(issuer, job_id) == [key] and attempt == 1


async def test_a_job_without_data_gets_no_credentials(live: Live, node: FakeAgent,
                                                     issuer: FlakyIssuer) -> None:
    job_id, _ = await place_job(live.exchange, node)
    assert keys(issuer, job_id) == []
    await node.close()
    await node.connect()
    again = StartJob.model_validate(await node.expect("start_job", job_id=job_id))
    assert again.data is None


async def test_credentials_are_revoked_when_the_attempt_ends(
        live: Live, node: FakeAgent, issuer: FlakyIssuer, plane: DataPlane) -> None:
    job_id, attempt = await place_job(live.exchange, node, **DATA)
    assert keys(issuer, job_id)
    await node.run_job(job_id, attempt)
    await plane.drain()
    assert keys(issuer, job_id) == []
    assert plane.grants == {}


@pytest.mark.parametrize(("data", "expected"), [
    ({"exit_code": 0, "outputs": DATA["outputs"]},
     ("SUCCEEDED", DATA["outputs"], "exited with code 0")),
    ({"exit_code": 0, "outputs_error": "model: access denied"},
     ("FAILED", None, "outputs could not be uploaded: model: access denied")),
    ({"exit_code": 2}, ("FAILED", None, "exited with code 2")),
])
async def test_outputs_decide_success(live: Live, node: FakeAgent, data: dict[str, Any],
                                      expected: tuple[str, Any, str]) -> None:
    job_id, attempt = await place_job(live.exchange, node, **DATA)
    await node.event(job_id, attempt, "started", pid=1)
    await node.event(job_id, attempt, "exited", **data)
    job = await live.exchange.job(job_id)
    assert (job["state"], job["outputs"], job["reason"]) == expected


@pytest.mark.parametrize(("data", "expected"), [
    ({"exit_code": 0, "outputs": DATA["outputs"]}, ("SUCCEEDED", DATA["outputs"])),
    ({"exit_code": 2}, ("FAILED", {})),
    ({"exit_code": 143, "reason": "cancelled"}, ("FAILED", {})),
])
async def test_the_kept_lightning_logs_are_an_output_however_the_job_ended(
        live: Live, node: FakeAgent, data: dict[str, Any],
        expected: tuple[str, dict[str, str]]) -> None:
    job_id, attempt = await place_job(live.exchange, node, **DATA)
    kept = f"s3://bourse/jobs/{job_id}/lightning_logs/"
    await node.event(job_id, attempt, "started", pid=1)
    await node.event(job_id, attempt, "exited", kept={"lightning_logs": kept}, **data)
    job = await live.exchange.job(job_id)
    assert (job["state"], job["outputs"]) == (expected[0], {**expected[1],
                                                            "lightning_logs": kept})


@pytest.mark.parametrize("kept", [
    {"lightning_logs": "s3://bourse/jobs/another-job/lightning_logs/"},
    {"model": "s3://results/run-1/model/"},  # only lightning_logs is ever kept
    {"lightning_logs": "not a uri"}, ["lightning_logs"],
])
async def test_a_node_keeps_nothing_but_the_job_s_own_lightning_logs(
        live: Live, node: FakeAgent, kept: Any) -> None:
    job_id, attempt = await place_job(live.exchange, node, **DATA)
    await node.event(job_id, attempt, "started", pid=1)
    await node.event(job_id, attempt, "exited", exit_code=3, kept=kept)
    job = await live.exchange.job(job_id)
    assert (job["state"], job["outputs"]) == ("FAILED", None)


async def test_progress_is_shown_while_starting(live: Live, node: FakeAgent) -> None:
    job_id, attempt = await place_job(live.exchange, node, **DATA)
    await node.event(job_id, attempt, "accepted")
    await node.event(job_id, attempt, "preparing", step="inputs", done=1, total=2,
                     text="inputs: 1 B / 2 B, 1 B/s")
    job = await live.exchange.job(job_id)
    assert (job["state"], job["progress"]) == ("STARTING", "inputs: 1 B / 2 B, 1 B/s")
    events = await live.exchange.events(job_id)
    assert events[-1]["message"] == "inputs: 1 B / 2 B, 1 B/s"
    await node.event(job_id, attempt, "started", pid=1)
    assert (await live.exchange.job(job_id))["progress"] is None


async def test_a_start_without_credentials_is_not_sent(live: Live, node: FakeAgent,
                                                       issuer: FlakyIssuer) -> None:
    issuer.down = True
    job = await live.exchange.submit(**DATA)
    await live.exchange.tick()
    said = "store credentials could not be issued (the store's IAM API is unreachable)"

    async def told() -> bool:
        return said in (await live.exchange.events(job["id"]))[-1]["message"]

    await until(told)
    await node.barrier()
    assert node.received("start_job") == []
    assert (await live.exchange.job(job["id"]))["state"] == "SCHEDULED"  # until its lease ends


async def test_renewal_and_recovery_after_a_restart(plane: DataPlane,
                                                    issuer: FlakyIssuer) -> None:
    spec = JobSpec(command=["x"], **DATA)
    first = await plane.credentials("j-1", 1, spec)
    later = first.expires_at - plane.ttl / 2 + timedelta(seconds=1)
    assert await plane.renew_due(later) == 1
    assert plane.grants[("j-1", 1)].expires_at == later + plane.ttl
    restarted = DataPlane(SETTINGS, "bourse", issuer, store=MemoryStore("bourse"),
                          opener=MemoryStores())
    assert await restarted.recover([("j-1", 1, spec), ("j-2", 1, spec)]) == 1
    adopted = restarted.grants[("j-1", 1)]
    assert (adopted.access_key.access_key_id, adopted.access_key.secret_access_key) == (
        first.access_key.access_key_id, "")
    fresh = await restarted.credentials("j-1", 1, spec)  # a start sent again: a new key
    assert fresh.access_key.secret_access_key and fresh.access_key != first.access_key
    restarted.on_commit({"ended_attempts": [("j-1", 1)]})
    await restarted.drain()
    assert keys(issuer, "j-1") == []
    with pytest.raises(CredentialError, match="has ended"):
        await restarted.credentials("j-1", 1, spec)


# --- bundles ----------------------------------------------------------------------------------

async def test_bundles_live_in_the_store(live: Live, plane: DataPlane) -> None:
    client, body = live.exchange.client, b"a bundle" * 1000
    sha = hashlib.sha256(body).hexdigest()
    assert (await client.head(f"/api/v1/bundles/{sha}")).status_code == 404
    assert (await client.put(f"/api/v1/bundles/{sha}", content=body)).status_code == 201
    store = plane.store
    assert isinstance(store, MemoryStore)
    assert store.objects[f"bundles/{sha}.tar.gz"][0] == body
    assert not list(live.exchange.config.bundles_dir.rglob(sha))
    assert (await client.head(f"/api/v1/bundles/{sha}")).status_code == 200
    fetched = await client.get(f"/api/v1/bundles/{sha}")
    assert (fetched.status_code, fetched.content) == (200, body)
    job = await live.exchange.submit(bundle=sha)
    assert job["spec"]["bundle"] == sha

