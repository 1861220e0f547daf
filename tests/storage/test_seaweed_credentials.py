"""Job-scoped credentials on the real SeaweedFS: what job A's key may and may not do."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bourse.storage import (
    AccessDenied,
    ContentCache,
    ObjectStore,
    Prefetcher,
    ScopedCredentials,
    SeaweedIssuer,
    SeaweedServer,
    Stores,
    StoreSettings,
    TransferFailed,
    UploadOptions,
    open_store,
    upload,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
async def issuer(seaweed: SeaweedServer) -> AsyncIterator[SeaweedIssuer]:
    made = SeaweedIssuer(seaweed.endpoint, seaweed.root_key)
    yield made
    await made.sweep(datetime.now(UTC) + timedelta(days=365))  # leave no identities behind


@pytest.fixture
def two_jobs(bucket: str, root_s3: Any) -> str:
    for job in ("a", "b"):
        root_s3.put_object(Bucket=bucket, Key=f"jobs/{job}/in/data.bin", Body=job.encode() * 10)
        root_s3.put_object(Bucket=bucket, Key=f"jobs/{job}/in/sub/more.bin", Body=b"more")
    return bucket


async def issue_a(issuer: SeaweedIssuer, bucket: str, **kwargs: Any) -> ScopedCredentials:
    return await issuer.issue("job-a", 1, [f"s3://{bucket}/jobs/a/in/"],
                              [f"s3://{bucket}/jobs/a/out/"], **kwargs)


def job_store(seaweed: SeaweedServer, creds: ScopedCredentials, bucket: str) -> ObjectStore:
    """The bucket as the job sees it: through its scoped key, without retries."""
    return open_store(f"s3://{bucket}", StoreSettings(
        endpoint=seaweed.endpoint, region="us-east-1", access_key=creds.access_key,
        max_retries=0))


async def test_job_a_reads_its_inputs_and_writes_its_outputs_only(
        seaweed: SeaweedServer, issuer: SeaweedIssuer, two_jobs: str) -> None:
    bucket = two_jobs
    creds = await issue_a(issuer, bucket)
    store = job_store(seaweed, creds, bucket)
    assert bytes(await store.get("jobs/a/in/data.bin")) == b"a" * 10
    assert [o.key for o in await store.list("jobs/a/in/")] == [
        "jobs/a/in/data.bin", "jobs/a/in/sub/more.bin"]
    await store.put("jobs/a/out/result.txt", b"done")
    assert bytes(await store.get("jobs/a/out/result.txt")) == b"done"  # reads back its output
    await store.delete("jobs/a/out/result.txt")
    denied = [
        store.get("jobs/b/in/data.bin"),            # another job's input
        store.head("jobs/b/in/data.bin"),
        store.list("jobs/b/"),                      # another job's listing
        store.list(""),                             # the whole bucket
        store.put("jobs/b/out/x", b"x"),            # another job's output
        store.put("jobs/a/in/data.bin", b"evil"),   # its own inputs are read-only
        store.put("elsewhere.txt", b"x"),           # outside every prefix
        store.delete("jobs/a/in/data.bin"),
    ]
    for attempt in denied:
        with pytest.raises(AccessDenied):
            await attempt
    other = open_store(f"s3://{bucket}", seaweed.settings())
    assert bytes(await other.get("jobs/a/in/data.bin")) == b"a" * 10  # nothing was changed


async def test_multipart_uploads_and_prefetch_work_with_scoped_keys(
        seaweed: SeaweedServer, issuer: SeaweedIssuer, two_jobs: str, tmp_path: Path) -> None:
    bucket = two_jobs
    creds = await issue_a(issuer, bucket)
    stores = Stores(seaweed.settings(creds.access_key))
    fetched = await Prefetcher(ContentCache(tmp_path / "cache", 1 << 30, keep_free=0),
                               stores).prefetch({"data": f"s3://{bucket}/jobs/a/in/"},
                                                tmp_path / "job", holder="job-a.1")
    assert (fetched.paths["data"] / "sub" / "more.bin").read_bytes() == b"more"
    with pytest.raises(AccessDenied):
        await Prefetcher(ContentCache(tmp_path / "c2", 1 << 30, keep_free=0), stores).prefetch(
            {"data": f"s3://{bucket}/jobs/b/in/"}, tmp_path / "job", holder="job-a.1")
    big = tmp_path / "out" / "model.bin"
    big.parent.mkdir()
    big.write_bytes(b"m" * (12 << 20))
    await upload(stores, big.parent, f"s3://{bucket}/jobs/a/out/", options=UploadOptions(
        part_size=5 << 20))
    head = await job_store(seaweed, creds, bucket).head("jobs/a/out/model.bin")
    assert head.size == 12 << 20 and head.etag.endswith("-3")
    with pytest.raises(TransferFailed, match="access denied"):
        await upload(stores, big.parent, f"s3://{bucket}/jobs/b/out/")


async def test_credentials_stop_working_after_revoke(
        seaweed: SeaweedServer, issuer: SeaweedIssuer, two_jobs: str) -> None:
    creds = await issue_a(issuer, two_jobs)
    store = job_store(seaweed, creds, two_jobs)
    await store.get("jobs/a/in/data.bin")
    assert await issuer.revoke("job-a", 1) == 1
    with pytest.raises(AccessDenied):
        await store.get("jobs/a/in/data.bin")
    assert await issuer.revoke("job-a", 1) == 0


async def test_credentials_stop_working_after_their_ttl(
        seaweed: SeaweedServer, issuer: SeaweedIssuer, two_jobs: str) -> None:
    now = datetime.now(UTC)
    creds = await issue_a(issuer, two_jobs, ttl=timedelta(minutes=30), now=now)
    other = await issuer.issue("job-b", 1, [f"s3://{two_jobs}/jobs/b/in/"], [],
                               ttl=timedelta(hours=5), now=now)
    store = job_store(seaweed, creds, two_jobs)
    assert await issuer.sweep(now + timedelta(minutes=10)) == 0
    renewed = await issuer.renew(creds, timedelta(hours=1), now=now + timedelta(minutes=20))
    assert renewed.access_key == creds.access_key  # the job keeps the key it has
    assert await issuer.sweep(now + timedelta(minutes=45)) == 0  # renewed past 30 min
    await store.get("jobs/a/in/data.bin")
    assert await issuer.sweep(now + timedelta(hours=2)) == 1  # job-b's key lives on
    with pytest.raises(AccessDenied):
        await store.get("jobs/a/in/data.bin")
    await job_store(seaweed, other, two_jobs).get("jobs/b/in/data.bin")


async def test_secrets_never_reach_the_logs(seaweed: SeaweedServer, issuer: SeaweedIssuer,
                                            two_jobs: str,
                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    creds = await issue_a(issuer, two_jobs)
    renewed = await issuer.renew(creds, timedelta(hours=3))
    store = job_store(seaweed, creds, two_jobs)
    with pytest.raises(AccessDenied):
        await store.get("jobs/b/in/data.bin")
    await issuer.revoke("job-a", 1)
    logging.getLogger("test").info("issued %r", renewed)
    secret = creds.access_key.secret_access_key
    assert creds.access_key.access_key_id in caplog.text  # the key id is logged...
    assert secret not in caplog.text  # ...the secret never
    assert seaweed.root_key.secret_access_key not in caplog.text
    assert secret not in seaweed.log_tail(100_000)
