"""``/api/v1/bundles/{sha256}``: content-addressed uploads, verified and size-limited."""

from __future__ import annotations

import hashlib
import os

import pytest
from server_harness import Exchange, job_spec
from sqlalchemy import delete

from bourse.server.db.schema import Bundle

pytestmark = pytest.mark.anyio


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _stored(exchange: Exchange) -> list[str]:
    root = exchange.config.bundles_dir
    return sorted(p.name for p in root.rglob("*") if p.is_file()) if root.exists() else []


async def test_upload_then_head_and_get(exchange: Exchange) -> None:
    data = os.urandom(40_000)
    sha = _sha(data)
    assert (await exchange.client.head(f"/api/v1/bundles/{sha}")).status_code == 404
    put = await exchange.client.put(f"/api/v1/bundles/{sha}", content=data)
    assert (put.status_code, put.json()) == (201, {"sha256": sha, "size": len(data)})
    assert (await exchange.client.head(f"/api/v1/bundles/{sha}")).status_code == 200
    got = await exchange.client.get(f"/api/v1/bundles/{sha}")
    assert (got.status_code, got.content) == (200, data)
    assert _stored(exchange) == [sha]


async def test_uploading_the_same_bundle_again_is_harmless(exchange: Exchange) -> None:
    data = b"same bytes"
    sha = _sha(data)
    for _ in range(2):
        put = await exchange.client.put(f"/api/v1/bundles/{sha}", content=data)
        assert (put.status_code, put.json()["size"]) == (201, len(data))
    assert _stored(exchange) == [sha]


async def test_a_body_that_does_not_hash_to_its_name_is_refused(exchange: Exchange) -> None:
    sha = _sha(b"the real bytes")
    put = await exchange.client.put(f"/api/v1/bundles/{sha}", content=b"other bytes")
    assert put.status_code == 422
    assert put.json()["field"] == "sha256"
    assert (await exchange.client.head(f"/api/v1/bundles/{sha}")).status_code == 404
    assert _stored(exchange) == []  # and no temporary file is left behind


async def test_a_bundle_over_the_limit_is_413(exchange: Exchange) -> None:
    data = os.urandom(exchange.config.bundle_max_bytes + 1)
    sha = _sha(data)
    put = await exchange.client.put(f"/api/v1/bundles/{sha}", content=data)
    assert put.status_code == 413
    assert put.json()["hint"]
    assert (await exchange.client.head(f"/api/v1/bundles/{sha}")).status_code == 404
    assert _stored(exchange) == []
    exact = os.urandom(exchange.config.bundle_max_bytes)
    fits = await exchange.client.put(f"/api/v1/bundles/{_sha(exact)}", content=exact)
    assert fits.status_code == 201


async def test_the_413_message_states_the_limit(exchange: Exchange) -> None:
    """It once rounded the limit down to whole MiB: 'larger than 0 MiB' for 64 KiB."""
    data = os.urandom(exchange.config.bundle_max_bytes + 1)
    put = await exchange.client.put(f"/api/v1/bundles/{_sha(data)}", content=data)
    assert put.status_code == 413
    assert "0 MiB" not in put.json()["error"]
    assert "64" in put.json()["error"]


@pytest.mark.parametrize("name", ["abc", "A" * 64, "g" * 64, "0" * 63, "0" * 65])
async def test_names_must_be_lowercase_sha256_hex(exchange: Exchange, name: str) -> None:
    for method in ("PUT", "HEAD", "GET"):
        response = await exchange.client.request(method, f"/api/v1/bundles/{name}",
                                                 content=b"x" if method == "PUT" else None)
        assert response.status_code == 422, (method, name)
        if method != "HEAD":
            assert response.json()["field"] == "path.sha256"


async def test_unknown_bundles_are_404(exchange: Exchange) -> None:
    sha = _sha(b"never uploaded")
    assert (await exchange.client.get(f"/api/v1/bundles/{sha}")).status_code == 404
    assert (await exchange.client.head(f"/api/v1/bundles/{sha}")).status_code == 404


async def test_uploading_again_repairs_a_bundle_file_without_its_row(
        exchange: Exchange) -> None:
    """A file on disk without its row (a crash between the two, or a data dir kept across a
    switch to PostgreSQL) was once never registered again: HEAD 404 and submit 422 forever."""
    data = b"bundle whose row was lost"
    sha = _sha(data)
    assert (await exchange.client.put(f"/api/v1/bundles/{sha}", content=data)).status_code == 201
    async with exchange.state.db.write() as session:
        await session.execute(delete(Bundle).where(Bundle.sha256 == sha))
    assert (await exchange.client.head(f"/api/v1/bundles/{sha}")).status_code == 404
    again = await exchange.client.put(f"/api/v1/bundles/{sha}", content=data)
    assert again.status_code == 201
    assert (await exchange.client.head(f"/api/v1/bundles/{sha}")).status_code == 200
    submitted = await exchange.client.post("/api/v1/jobs", json=job_spec(bundle=sha))
    assert submitted.status_code == 201, submitted.text
