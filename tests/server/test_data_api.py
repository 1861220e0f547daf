"""``GET /api/v1/data/summary``: what the exchange's store holds at a URI — one object or every
object below a prefix — with a digest that moves when an object is rewritten, added or removed;
refusals that say what to do; a store that cannot be reached is a 503 that says so, and the app
driver that asked runs its stage instead of reusing a cached result."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from server_harness import Exchange, open_exchange, serve

from bourse import Compute, Work
from bourse.app.call import Call
from bourse.app.exchange import ExchangeBackend
from bourse.local.processes import free_port
from bourse.sdk.client import Client
from bourse.server.dataplane import DataPlane
from bourse.storage import AccessKey, MemoryIssuer, MemoryStore, StoreSettings

pytestmark = pytest.mark.anyio


@pytest.fixture
def exchange(store_exchange: Exchange) -> Exchange:
    return store_exchange


async def _summary(exchange: Exchange, uri: str) -> dict[str, Any]:
    response = await exchange.client.get("/api/v1/data/summary", params={"uri": uri})
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def test_a_prefix_is_summed_up_and_its_digest_follows_its_objects(
        exchange: Exchange, store: MemoryStore) -> None:
    await store.put("data/a.txt", b"one")
    first = await _summary(exchange, "s3://bourse/data/")
    assert await _summary(exchange, "s3://bourse/data/") == first
    await store.put("data/a.txt", b"uno")
    rewritten = await _summary(exchange, "s3://bourse/data/")
    await store.put("data/sub/b.txt", b"two")
    added = await _summary(exchange, "s3://bourse/data/")
    await store.delete("data/sub/b.txt")
    removed = await _summary(exchange, "s3://bourse/data/")

    assert (first["objects"], first["bytes"], first["single"]) == (1, 3, False)
    assert (added["objects"], added["bytes"]) == (2, 6)
    assert len({first["digest"], rewritten["digest"], added["digest"]}) == 3
    assert removed["digest"] == rewritten["digest"]


async def test_a_uri_naming_one_object_is_that_object_and_an_empty_prefix_is_nothing(
        exchange: Exchange, store: MemoryStore) -> None:
    await store.put("data/a.txt", b"one")
    await store.put("data/a.txt.bak", b"old")

    single = await _summary(exchange, "s3://bourse/data/a.txt")
    as_prefix = await _summary(exchange, "s3://bourse/data")  # no object "data": the prefix
    empty = await _summary(exchange, "s3://bourse/nothing/")

    assert (single["single"], single["objects"], single["bytes"]) == (True, 1, 3)
    assert (as_prefix["single"], as_prefix["objects"]) == (False, 2)
    assert (empty["objects"], empty["bytes"]) == (0, 0)


@pytest.mark.parametrize(("uri", "says"), [
    ("gs://bourse/data/", "is not an s3:// URI"),
    ("s3://bourse/../x", "uri"),
    ("", "uri"),
])
async def test_a_uri_the_exchange_cannot_read_is_refused(
        exchange: Exchange, uri: str, says: str) -> None:
    response = await exchange.client.get("/api/v1/data/summary", params={"uri": uri})

    assert response.status_code == 422, response.text
    assert says in response.text


async def test_without_a_token_nothing_is_told(exchange: Exchange) -> None:
    response = await exchange.client.get("/api/v1/data/summary", params={"uri": "s3://bourse/"},
                                         headers={"Authorization": ""})

    assert response.status_code == 401


async def test_an_exchange_without_a_store_says_so(database_url: str, tmp_path: Path) -> None:
    async with open_exchange(tmp_path, database_url) as bare:
        response = await bare.client.get("/api/v1/data/summary",
                                         params={"uri": "s3://bourse/data/"})

    assert response.status_code == 422
    assert "this exchange has no object store" in response.json()["error"]


def _unreachable() -> DataPlane:
    """A real obstore client for a store on a loopback port nobody listens on."""
    settings = StoreSettings(endpoint=f"http://127.0.0.1:{free_port()}", region="us-east-1",
                             path_style=True, access_key=AccessKey("k", "s"), max_retries=0)
    return DataPlane(settings, "bourse", MemoryIssuer())


async def test_an_unreachable_store_is_a_503_that_says_so(
        database_url: str, tmp_path: Path) -> None:
    async with open_exchange(tmp_path, database_url, dataplane=_unreachable()) as cut_off:
        response = await cut_off.client.get("/api/v1/data/summary",
                                            params={"uri": "s3://bourse/data/"})

    assert response.status_code == 503, response.text
    assert "store unavailable for s3://bourse/data/" in response.json()["error"]


class Count(Work):
    def run(self, corpus: Path) -> int:
        return len(list(corpus.iterdir()))


async def test_the_app_driver_runs_its_stage_when_the_store_is_unreachable(
        database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call = Call("Count", ["python", "-c", "pass"], {}, {"corpus": "s3://bourse/data/"})
    stage = Count(compute=Compute("cpu"), cache=True)
    async with open_exchange(tmp_path, database_url, dataplane=_unreachable()) as cut_off, \
            serve(cut_off) as live:
        with Client(live.http_url, await cut_off.user_token()) as client:
            backend = ExchangeBackend(client, tmp_path, "r-1")
            key, hit = await asyncio.to_thread(backend.lookup, stage, call)

    assert (key, hit) == (None, None)  # no key: its result is not cached either
    out = capsys.readouterr().out
    assert "[Count] cache: cannot read input 'corpus' at s3://bourse/data/" in out
    assert "store unavailable" in out
    assert "running the stage; its result will not be cached" in out
