"""``/api/v1/bundles/{sha256}``: content-addressed code bundles (in the exchange's store when it
has one; see ``bourse.server.bundles``)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import FileResponse, StreamingResponse

from bourse.core.errors import NotFound
from bourse.server.db.schema import Bundle
from bourse.server.routes.deps import State, User, UserOrNode

router = APIRouter(prefix="/api/v1/bundles", tags=["bundles"])
Sha = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]


@router.put("/{sha256}", status_code=201)
async def upload(sha256: Sha, request: Request, state: State, _user: User) -> dict[str, object]:
    size = await state.bundles.size(sha256)
    if size is None:
        size = await state.bundles.put(sha256, request.stream())
    async with state.db.write() as session:  # also repairs a stored file without its row
        if await session.get(Bundle, sha256) is None:
            session.add(Bundle(sha256=sha256, size=size, created_at=time.time()))
    return {"sha256": sha256, "size": size}


@router.head("/{sha256}")
async def exists(sha256: Sha, state: State, _who: UserOrNode) -> Response:
    async with state.db.read() as session:
        found = await session.get(Bundle, sha256) is not None
    return Response(status_code=200 if found and await state.bundles.size(sha256) is not None
                    else 404)


@router.get("/{sha256}", response_model=None)
async def download(sha256: Sha, state: State,
                   _who: UserOrNode) -> FileResponse | StreamingResponse:
    size = await state.bundles.size(sha256)
    if size is None:
        raise NotFound(f"no bundle {sha256[:12]}…")
    local = state.bundles.path(sha256)
    if local.is_file():
        return FileResponse(local, media_type="application/gzip")
    return StreamingResponse(state.bundles.read(sha256, size), media_type="application/gzip",
                             headers={"Content-Length": str(size)})
