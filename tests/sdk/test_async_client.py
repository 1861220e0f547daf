"""AsyncClient: the same calls over an in-process ASGI app (httpx.ASGITransport)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sdk_fakes import TOKEN, URL, chunk, event, job, sse_response
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bourse.core.errors import NotFound
from bourse.protocol.api import JobView, LogChunkView
from bourse.sdk.async_client import AsyncClient
from bourse.sdk.errors import Unauthorized, Unreachable

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def authorised(request: Request) -> bool:
    return request.headers.get("authorization") == f"Bearer {TOKEN}"


async def get_job(request: Request) -> Response:
    if not authorised(request):
        return JSONResponse({"error": "bad token"}, 401)
    if request.path_params["job_id"] != "j1":
        return JSONResponse({"error": "no such job", "hint": "run `bourse jobs`"}, 404)
    return JSONResponse(job(state="RUNNING", attempts=[]))


async def follow_logs(request: Request) -> Response:
    after = int(request.query_params["after"])

    async def body() -> AsyncIterator[str]:
        yield ": keep-alive\n\n"
        for cursor in range(after + 1, 4):
            yield event("chunk", chunk(cursor, f"line {cursor}\n"))
        yield event("end", job(state="SUCCEEDED", exit_code=0))

    return StreamingResponse(body(), media_type="text/event-stream")


async def put_bundle(request: Request) -> Response:
    data = await request.body()
    sha = request.path_params["sha"]
    assert hashlib.sha256(data).hexdigest() == sha
    return JSONResponse({"sha256": sha, "size": len(data)}, 201)


app = Starlette(routes=[
    Route("/api/v1/jobs/{job_id}", get_job),
    Route("/api/v1/jobs/{job_id}/logs/follow", follow_logs),
    Route("/api/v1/bundles/{sha}", put_bundle, methods=["PUT"]),
])


def client(token: str = TOKEN) -> AsyncClient:
    return AsyncClient("http://bourse.local", token, transport=httpx.ASGITransport(app))


async def test_get_a_job() -> None:
    async with client() as c:
        detail = await c.job("j1")
    assert (detail.id, detail.state) == ("j1", "RUNNING")


async def test_errors_are_mapped_as_in_the_sync_client() -> None:
    async with client() as c:
        with pytest.raises(NotFound, match="bourse jobs"):
            await c.job("nope")
    async with client("wrong") as c:
        with pytest.raises(Unauthorized):
            await c.job("j1")


async def test_follow_over_asgi() -> None:
    async with client() as c:
        items = [item async for item in c.follow("j1", after=1)]
    assert [i.cursor for i in items if isinstance(i, LogChunkView)] == [2, 3]
    assert isinstance(items[-1], JobView) and items[-1].state == "SUCCEEDED"


async def test_upload_streams_a_file(tmp_path: Path) -> None:
    data = b"bundle" * 400_000
    path = tmp_path / "b.tar.gz"
    path.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    async with client() as c:
        stored = await c.upload_bundle(path, sha)
    assert stored.size == len(data)


async def test_follow_reconnects_after_a_drop() -> None:
    answers = [sse_response([event("chunk", chunk(1, "a"))], error=True),
               sse_response([event("end", job(state="FAILED", exit_code=3))])]
    afters: list[str] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        afters.append(request.url.params["after"])
        return answers.pop(0)

    async with AsyncClient(URL, TOKEN, transport=httpx.MockTransport(handler)) as c:
        c.reconnect_delays = (0.0,)
        items = [item async for item in c.follow("j1")]
    assert afters == ["0", "1"]
    assert isinstance(items[-1], JobView) and items[-1].exit_code == 3


async def test_unreachable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with AsyncClient(URL, TOKEN, transport=httpx.MockTransport(refuse)) as c:
        with pytest.raises(Unreachable, match="bourse up"):
            await c.jobs()
