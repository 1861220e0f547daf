"""``/api/v1/bundles/{sha256}``: content-addressed code bundles (in the exchange's store when it
has one; see ``bourse.server.files.bundles``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import FileResponse, StreamingResponse

from bourse.core.errors import NotFound
from bourse.server.errors import responses
from bourse.server.routes.deps import State, User, UserOrNode
from bourse.server.services import bundles
from bourse.server.services.tokens import Principal
from bourse.server.state import ServerState

router = APIRouter(prefix="/api/v1/bundles", tags=["bundles"])
Sha = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]


@router.put("/{sha256}", status_code=201, responses=responses(401, 413, 422))
async def upload(sha256: Sha, request: Request, state: State, user: User) -> dict[str, object]:
    """Upload a bundle under its SHA-256. The bytes are received and checked even when the
    exchange already holds them, so that a project proves it has the content it claims."""
    stored = await state.bundles.size(sha256)
    put = state.bundles.put if stored is None else state.bundles.check
    size = await put(sha256, request.stream())
    async with state.db.write() as session:
        await bundles.record_upload(session, sha256, size, user.project_id, state.clock())
    return {"sha256": sha256, "size": size}


async def _readable(state: ServerState, sha256: str, who: Principal) -> bool:
    async with state.db.read() as session:
        return await bundles.may_read(session, sha256, who)


@router.head("/{sha256}", response_class=Response, responses={
    200: {"description": "The bundle is here."},
    404: {"description": "No such bundle, or not readable with this token (no body)."},
    **responses(401, 422)})
async def exists(sha256: Sha, state: State, who: UserOrNode) -> Response:
    found = await _readable(state, sha256, who)
    return Response(status_code=200 if found and await state.bundles.size(sha256) is not None
                    else 404)


@router.get("/{sha256}", response_model=None, response_class=Response, responses={
    200: {"description": "The bundle (a gzipped tar).", "content": {"application/gzip": {}}},
    **responses(401, 404, 422)})
async def download(sha256: Sha, state: State,
                   who: UserOrNode) -> FileResponse | StreamingResponse:
    size = await state.bundles.size(sha256) if await _readable(state, sha256, who) else None
    if size is None:
        raise NotFound(f"no bundle {sha256[:12]}…")
    local = state.bundles.path(sha256)
    if local.is_file():
        return FileResponse(local, media_type="application/gzip")
    return StreamingResponse(state.bundles.read(sha256, size), media_type="application/gzip",
                             headers={"Content-Length": str(size)})
