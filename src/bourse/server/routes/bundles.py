"""``/api/v1/bundles/{sha256}``: content-addressed code bundles."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import FileResponse

from bourse.core.errors import NotFound
from bourse.server.db.schema import Bundle
from bourse.server.routes.deps import State, User, UserOrNode

router = APIRouter(prefix="/api/v1/bundles", tags=["bundles"])
Sha = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]


@router.put("/{sha256}", status_code=201)
async def upload(sha256: Sha, request: Request, state: State, _user: User) -> dict[str, object]:
    if not state.bundles.exists(sha256):
        await state.bundles.put(sha256, request.stream())
    size = state.bundles.path(sha256).stat().st_size
    async with state.db.write() as session:  # also repairs a stored file without its row
        if await session.get(Bundle, sha256) is None:
            session.add(Bundle(sha256=sha256, size=size, created_at=time.time()))
    return {"sha256": sha256, "size": size}


@router.head("/{sha256}")
async def exists(sha256: Sha, state: State, _who: UserOrNode) -> Response:
    async with state.db.read() as session:
        found = await session.get(Bundle, sha256) is not None
    return Response(status_code=200 if found and state.bundles.exists(sha256) else 404)


@router.get("/{sha256}")
async def download(sha256: Sha, state: State, _who: UserOrNode) -> FileResponse:
    if not state.bundles.exists(sha256):
        raise NotFound(f"no bundle {sha256[:12]}…")
    return FileResponse(state.bundles.path(sha256), media_type="application/gzip")
