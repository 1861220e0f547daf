"""``/api/v1/data``: what the exchange's store holds at a URI, for clients that cannot read the
store themselves (``bourse.server.dataplane.summary``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from bourse.protocol.api import DataSummary
from bourse.protocol.common import NO_NUL
from bourse.server.dataplane.summary import location, summarise
from bourse.server.errors import responses
from bourse.server.routes.deps import State, User
from bourse.server.services import claims

router = APIRouter(prefix="/api/v1/data", tags=["data"])
UriQuery = Annotated[str, Query(min_length=1, max_length=2048, pattern=NO_NUL)]


@router.get("/summary", responses=responses(401, 404, 422, 502, 503))
async def summary(uri: UriQuery, state: State, user: User) -> DataSummary:
    """The object ``uri`` names, or every object below it: count, bytes and a digest of their
    keys, sizes and ETags (404: the caller's project may not read it, 502: the store failed or
    refused, 503: it is unreachable)."""
    plane, where = location(state.dataplane, uri)
    async with state.db.read() as session:
        await claims.check_visible(session, where, user.project_id, plane.root)
    return await summarise(plane, where)
