"""Data in the store is split by project: a job's writes claim their prefixes for its project
(``services.claims``), and another project's jobs can neither read nor write where they
overlap; the exchange's own prefixes (logs, bundles, other projects' job prefixes) are read by
no job; ``GET /data/summary`` tells a project only about what its jobs may read. Unclaimed
data (put in the store outside bourse) stays readable by every project."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from fake_agent import FakeAgent
from server_harness import Exchange, job_spec
from sqlalchemy import select

from bourse.server.dataplane.plan import ancestors, below, check_read, job_of
from bourse.server.db.schema import StoreClaim
from bourse.storage import MemoryStore, parse_uri

pytestmark = pytest.mark.anyio
ROOT = parse_uri("s3://bourse/")
OUT = "s3://bourse/data/alpha/model/"
CKPT = "s3://bourse/data/alpha/ckpt/"
SHARED = "s3://datasets/digits/"  # put there by the operator: nobody's claim


@pytest.fixture
def exchange(store_exchange: Exchange) -> Exchange:
    return store_exchange


class Project:
    def __init__(self, exchange: Exchange, headers: dict[str, str]) -> None:
        self.exchange, self.headers = exchange, headers

    async def submit(self, **spec: Any) -> httpx.Response:
        return await self.exchange.client.post("/api/v1/jobs", json=job_spec(**spec),
                                               headers=self.headers)

    async def job(self, **spec: Any) -> dict[str, Any]:
        response = await self.submit(**spec)
        assert response.status_code == 201, response.text
        found: dict[str, Any] = response.json()
        return found

    async def summary(self, uri: str) -> httpx.Response:
        return await self.exchange.client.get("/api/v1/data/summary", params={"uri": uri},
                                              headers=self.headers)


async def _project(exchange: Exchange, name: str) -> Project:
    token = await exchange.project_token(name)
    return Project(exchange, {"Authorization": f"Bearer {token}"})


@pytest.fixture
async def alpha(exchange: Exchange) -> Project:
    return await _project(exchange, "alpha-corp")


@pytest.fixture
async def beta(exchange: Exchange) -> Project:
    return await _project(exchange, "beta-labs")


def _refused(response: httpx.Response, field: str, status: int = 403) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["field"] == field
    assert "alpha-corp" not in response.text  # the owner is not named
    message: str = body["error"]
    return message


# --- the pure parts ---------------------------------------------------------------------------

def test_ancestors_and_the_range_below_a_prefix() -> None:
    assert ancestors("a/b/") == ["", "a/", "a/b/"]
    assert ancestors("") == [""]
    assert below("a/b/") == ("a/b/", "a/b0")  # "0" is the byte after "/"
    assert below("") is None


@pytest.mark.parametrize(("uri", "job"), [
    ("s3://bourse/jobs/j-1/checkpoints/", "j-1"), ("s3://bourse/jobs/j-1", "j-1"),
    ("s3://bourse/jobs/", None), ("s3://bourse/jobs", None), ("s3://other/jobs/j-1/", None),
    ("s3://bourse/data/jobs/j-1/", None)])
def test_job_of(uri: str, job: str | None) -> None:
    assert job_of(parse_uri(uri), ROOT) == job


@pytest.mark.parametrize("uri", [
    "s3://bourse/logs/j-1.jsonl.gz", "s3://bourse/logs/", "s3://bourse/bundles/", "s3://bourse/",
    "s3://bourse/jobs/", "s3://bourse/bundles/ab.tar.gz"])
def test_no_job_reads_the_exchanges_own_prefixes(uri: str) -> None:
    with pytest.raises(Exception, match="keeps for itself"):
        check_read("inputs.x", parse_uri(uri), ROOT)


# --- submit -----------------------------------------------------------------------------------

async def test_a_jobs_writes_are_claimed_for_its_project(exchange: Exchange,
                                                         alpha: Project) -> None:
    job = await alpha.job(outputs={"model": OUT, "again": OUT + "sub/x.bin"})
    async with exchange.state.db.read() as session:
        rows = {(c.bucket, c.prefix, c.project_id, c.job_id)
                for c in (await session.scalars(select(StoreClaim))).all()}
    # the default checkpoint (jobs/<id>/) is the job's own, not a claim
    assert rows == {("bourse", "data/alpha/model/", "alpha-corp", job["id"]),
                    ("bourse", "data/alpha/model/sub/x.bin/", "alpha-corp", job["id"])}


@pytest.mark.parametrize(("spec", "field"), [
    ({"inputs": {"x": OUT}}, "inputs.x"),  # the output itself
    ({"inputs": {"x": OUT + "weights.pt"}}, "inputs.x"),  # an object inside it
    ({"inputs": {"x": "s3://bourse/data/"}}, "inputs.x"),  # a prefix above it
    ({"inputs": {"x": CKPT}}, "inputs.x"),  # its explicit checkpoint
    ({"outputs": {"m": OUT}}, "outputs.m"),  # overwriting it
    ({"outputs": {"m": OUT + "evil/"}}, "outputs.m"),  # writing inside it
    ({"outputs": {"m": "s3://bourse/data/alpha/"}}, "outputs.m"),  # or above it
    ({"checkpoint": CKPT + "latest/"}, "checkpoint")])
async def test_another_project_neither_reads_nor_writes_a_claimed_prefix(
        alpha: Project, beta: Project, spec: dict[str, Any], field: str) -> None:
    await alpha.job(outputs={"model": OUT}, checkpoint=CKPT)
    message = _refused(await beta.submit(**spec), field)
    assert "belongs to another project" in message


async def test_another_project_does_not_read_a_jobs_default_checkpoint(
        alpha: Project, beta: Project) -> None:
    job = await alpha.job(outputs={"model": OUT})
    theirs = f"s3://bourse/jobs/{job['id']}/checkpoints/"
    refused = await beta.submit(inputs={"c": theirs})
    nowhere = await beta.submit(inputs={"c": "s3://bourse/jobs/j-no-such-job/checkpoints/"})
    _refused(refused, "inputs.c")
    # a job that does not exist is refused in the same words: nothing is learnt
    assert refused.json()["error"].replace(job["id"], "ID") == \
        nowhere.json()["error"].replace("j-no-such-job", "ID")
    assert (await alpha.submit(inputs={"c": theirs})).status_code == 201


@pytest.mark.parametrize("uri", ["s3://bourse/logs/", "s3://bourse/bundles/", "s3://bourse/",
                                 "s3://bourse/jobs/"])
async def test_no_job_reads_logs_bundles_or_every_job(alpha: Project, beta: Project,
                                                      uri: str) -> None:
    job = await alpha.job(outputs={"model": OUT})
    for reader, target in ((beta, uri), (alpha, uri),
                           (beta, f"s3://bourse/logs/{job['id']}.jsonl.gz")):
        response = await reader.submit(inputs={"x": target})
        assert response.status_code == 422, response.text
        assert "keeps for itself" in response.json()["error"]


async def test_a_project_reads_its_own_outputs_in_a_later_job_and_writes_them_again(
        alpha: Project) -> None:
    first = await alpha.job(outputs={"model": OUT}, checkpoint=CKPT)
    await alpha.job(inputs={"model": OUT, "ckpt": CKPT,
                            "own": f"s3://bourse/jobs/{first['id']}/checkpoints/"},
                    outputs={"eval": "s3://bourse/data/alpha/eval/"})
    await alpha.job(outputs={"model": OUT}, checkpoint=CKPT)  # a retry: same prefixes
    await alpha.job(outputs={"all": "s3://bourse/data/alpha/"})  # above its own: fine


async def test_unclaimed_data_is_read_by_every_project(alpha: Project, beta: Project,
                                                       store: MemoryStore) -> None:
    await store.put("shared/corpus.txt", b"put there by the operator")
    await alpha.job(inputs={"d": SHARED, "c": "s3://bourse/shared/"}, outputs={"model": OUT})
    await beta.job(inputs={"d": SHARED, "file": SHARED + "labels.csv",
                           "c": "s3://bourse/shared/corpus.txt"})
    for project in (alpha, beta):
        assert (await project.summary("s3://bourse/shared/")).json()["objects"] == 1


async def test_neighbours_are_not_overlaps(alpha: Project, beta: Project) -> None:
    """Keys compare byte by byte (PostgreSQL's collation would put ``x-y/`` between ``x/``
    and ``x0``): only a prefix relation is an overlap."""
    await alpha.job(outputs={"m": "s3://bourse/data/x/"})
    for uri in ("s3://bourse/data/x-y/", "s3://bourse/data/x0/", "s3://bourse/data/X/",
                "s3://bourse/data/xx/", "s3://bourse/data/x.y/", "s3://other/data/x/"):
        assert (await beta.submit(outputs={"m": uri})).status_code == 201, uri
    _refused(await beta.submit(outputs={"m": "s3://bourse/data/x"}), "outputs.m")


async def test_a_whole_bucket_claim_covers_every_key_of_it(alpha: Project,
                                                           beta: Project) -> None:
    await alpha.job(outputs={"m": "s3://results/"})
    _refused(await beta.submit(inputs={"d": "s3://results/deep/down/x.bin"}), "inputs.d")
    assert (await beta.submit(outputs={"m": "s3://results2/x/"})).status_code == 201


async def test_app_runs_share_runs_but_not_each_others_run(alpha: Project,
                                                           beta: Project) -> None:
    mine = "s3://bourse/runs/r-alpha/Train/"
    await alpha.job(outputs={"model": mine + "model/"}, checkpoint=mine + "checkpoints/")
    await beta.job(outputs={"model": "s3://bourse/runs/r-beta/Train/model/"})
    _refused(await beta.submit(inputs={"m": mine + "model/"}), "inputs.m")
    whole = await beta.submit(outputs={"m": "s3://bourse/runs/"})
    assert whole.status_code == 422 and "app runs of every project" in whole.json()["error"]


async def test_a_batch_is_checked_job_by_job_and_refused_whole(
        exchange: Exchange, alpha: Project, beta: Project) -> None:
    await alpha.job(outputs={"model": OUT})
    batch = [job_spec(inputs={"d": SHARED}), job_spec(inputs={"m": OUT})]
    refused = await exchange.client.post("/api/v1/jobs/batch", json={"jobs": batch},
                                         headers=beta.headers)
    _refused(refused, "inputs.m")
    listed = await exchange.client.get("/api/v1/jobs", headers=beta.headers)
    assert listed.json()["jobs"] == []  # nothing half-submitted
    chained = [job_spec(outputs={"m": "s3://bourse/data/alpha/b1/"}),
               job_spec(inputs={"m": "s3://bourse/data/alpha/b1/"})]
    made = await exchange.client.post("/api/v1/jobs/batch", json={"jobs": chained},
                                      headers=alpha.headers)
    assert made.status_code == 201, made.text


# --- the data summary -------------------------------------------------------------------------

async def test_the_summary_tells_a_project_only_what_its_jobs_may_read(
        alpha: Project, beta: Project, store: MemoryStore) -> None:
    job = await alpha.job(outputs={"model": OUT})
    await store.put("data/alpha/model/w.pt", b"weights")
    await store.put(f"logs/{job['id']}.jsonl.gz", b"logs")
    assert (await alpha.summary(OUT)).json()["objects"] == 1
    for uri in (OUT, OUT + "w.pt", "s3://bourse/data/", f"s3://bourse/logs/{job['id']}.jsonl.gz",
                "s3://bourse/bundles/", f"s3://bourse/jobs/{job['id']}/checkpoints/"):
        response = await beta.summary(uri)
        assert response.status_code == 404, (uri, response.text)
        assert "weights" not in response.text and "objects" not in response.json()
    assert (await alpha.summary("s3://bourse/logs/")).status_code == 404
    assert (await alpha.summary(f"s3://bourse/jobs/{job['id']}/checkpoints/")).status_code == 200


# --- placement --------------------------------------------------------------------------------

async def test_a_pending_job_whose_input_was_claimed_since_fails_instead_of_reading_it(
        exchange: Exchange, alpha: Project, beta: Project,
        agent_factory: Callable[..., Awaitable[FakeAgent]]) -> None:
    """Beta reads a prefix nobody had claimed yet; alpha then writes there first. Beta's job
    is not given credentials for alpha's data: placement fails it and says why."""
    early = await beta.job(inputs={"x": "s3://bourse/data/soon/"})
    own = await beta.job(inputs={"d": SHARED})
    await alpha.job(outputs={"model": "s3://bourse/data/soon/model/"})
    agent = await agent_factory("node", cpus=8)
    await exchange.tick()

    failed = await exchange.job(early["id"])
    assert failed["state"] == "FAILED"
    assert failed["reason"] == ("inputs.x: s3://bourse/data/soon/ belongs to another project "
                                "(claimed after this job was submitted)")
    assert "alpha-corp" not in str(failed)
    await agent.expect("start_job", job_id=own["id"])  # the others are placed as before
