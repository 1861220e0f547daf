"""Request bodies past the size limit are refused with a 413 that says so, whether their size
is announced or not; bundles have a limit of their own."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from server_harness import Exchange

from bourse.server.http.limits import MAX_BODY_BYTES

pytestmark = pytest.mark.anyio
TOO_BIG = b'{"command": ["' + b"x" * MAX_BODY_BYTES + b'"]}'


async def _chunks() -> AsyncIterator[bytes]:
    for start in range(0, len(TOO_BIG), 1 << 20):
        yield TOO_BIG[start:start + (1 << 20)]


async def test_an_announced_oversized_body_is_refused(exchange: Exchange) -> None:
    response = await exchange.client.post("/api/v1/jobs", content=TOO_BIG,
                                          headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert "larger than the limit of 16" in response.json()["error"]


async def test_a_streamed_oversized_body_is_cut_off(exchange: Exchange) -> None:
    response = await exchange.client.post("/api/v1/jobs", content=_chunks(),
                                          headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.json()["hint"]
    assert (await exchange.client.get("/api/v1/jobs")).json()["jobs"] == []
    record = (await exchange.client.get("/api/v1/audit")).json()["records"][-1]
    assert (record["action"], record["outcome"]) == ("POST /api/v1/jobs", "413")
