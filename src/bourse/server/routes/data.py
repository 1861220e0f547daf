"""``/api/v1/data``: what the exchange's store holds at a URI, for clients that cannot read the
store themselves (``bourse.server.dataplane.summary``); the caller's project's home; and
short-lived store credentials for the caller (``bourse cp``, ``ls``, ``rm``:
``bourse.server.dataplane.grants``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from bourse.core.errors import NotFound
from bourse.protocol.api import DataGrant, DataGrantRequest, DataHome, DataSummary
from bourse.protocol.common import NO_NUL
from bourse.server.dataplane import grants
from bourse.server.dataplane.plan import home_uri
from bourse.server.dataplane.summary import location, plane_of, summarise
from bourse.server.errors import responses
from bourse.server.routes.deps import State, User
from bourse.server.services import claims

router = APIRouter(prefix="/api/v1/data", tags=["data"])
UriQuery = Annotated[str, Query(min_length=1, max_length=2048, pattern=NO_NUL)]
GrantId = Annotated[str, Path(pattern=r"^u[0-9a-f]{20}$")]


@router.get("/summary", responses=responses(401, 404, 422, 502, 503))
async def summary(uri: UriQuery, state: State, user: User) -> DataSummary:
    """The object ``uri`` names, or every object below it: count, bytes and a digest of their
    keys, sizes and ETags (404: the caller's project may not read it, 502: the store failed or
    refused, 503: it is unreachable)."""
    plane, where = location(state.dataplane, uri)
    async with state.db.read() as session:
        await claims.check_visible(session, where, user.project_id, plane.root)
    return await summarise(plane, where)


@router.get("/home", responses=responses(401, 422))
async def home(state: State, user: User) -> DataHome:
    """The exchange's bucket and the caller's project's home in it, ``projects/<project>/``:
    only that project reads and writes there."""
    plane = plane_of(state.dataplane)
    return DataHome(store=str(plane.root), home=str(home_uri(plane.root, user.project_id)),
                    project=user.project_id)


@router.post("/credentials", status_code=201,
             responses=responses(400, 401, 403, 422, 502, 503))
async def credentials(body: DataGrantRequest, state: State, user: User) -> DataGrant:
    """Store credentials for the caller: read ``read``, read, write and delete below
    ``write``, for ``ttl_s`` seconds (the endpoint and the key; never the store's root key).
    What is written is claimed for the caller's project, as a job's outputs are (403: another
    project's data or home, 422: a URI that cannot be granted or a bucket that does not
    exist)."""
    plane = plane_of(state.dataplane)
    found = grants.asked(body.read, body.write, plane.root)
    await plane.buckets.check([*found.read, *found.write], user.project_id)
    grant_id = grants.new_grant_id()
    async with state.db.write() as session:
        await claims.claim_locations(session, found.locations(found.read),
                                     found.locations(found.write), user.project_id,
                                     plane.root, claimant=grant_id, now=state.clock())
    issued = await plane.users.issue(grant_id, user.project_id, found,
                                     timedelta(seconds=body.ttl_s))
    return grants.grant_view(grant_id, plane.settings, issued)


@router.delete("/credentials/{grant_id}", status_code=204, response_class=Response,
               responses=responses(401, 404, 422))
async def revoke(grant_id: GrantId, state: State, user: User) -> Response:
    """Revoke credentials before they expire (a command that is done with them)."""
    plane = plane_of(state.dataplane)
    if not await plane.users.revoke(grant_id, user.project_id):
        raise NotFound(f"no store credentials {grant_id} of your project",
                       hint="they may have expired, or the exchange restarted since")
    return Response(status_code=204)
