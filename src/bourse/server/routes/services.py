"""``/api/v1/services``: apply a version (create, or start a rollout), list, show, roll back,
stop. The traffic itself goes through the gateway (``routes.gateway``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from bourse.protocol.services import (
    SERVICE_NAME_PATTERN,
    ServiceApply,
    ServiceDetail,
    ServiceList,
    ServiceView,
)
from bourse.server.errors import responses
from bourse.server.routes.deps import State, User
from bourse.server.services import serving as svc
from bourse.server.serving.views import service_detail, service_view

router = APIRouter(prefix="/api/v1/services", tags=["services"])
NamePath = Annotated[str, Path(pattern=SERVICE_NAME_PATTERN, max_length=64)]


@router.post("", responses=responses(400, 401, 409, 422))
async def apply(body: ServiceApply, state: State, user: User) -> ServiceView:
    """Create the service, or start a rollout when the version differs from the live ones;
    the same version again changes nothing. Its first replicas are submitted at once."""
    now = state.clock()
    box = state.secret_box if body.job.secrets else None
    async with state.db.write() as session:
        service, outcome, commands = await svc.apply_service(session, body, user.project_id,
                                                             now)
        if outcome != "unchanged":
            number = service.canary if outcome == "rollout" else service.stable
            assert number is not None
            await svc.add_replicas(session, service, number, svc.first_count(body),
                                   now=now, store=state.store_root, box=box)
        view = await service_view(session, service, state.gateway, now)
    state.hub.send(commands)
    state.scheduler.kick()
    return view


@router.get("", responses=responses(401))
async def list_services(state: State, user: User) -> ServiceList:
    now = state.clock()
    async with state.db.read() as session:
        rows = await svc.list_services(session, user.scope)
        return ServiceList(services=[await service_view(session, r, state.gateway, now)
                                     for r in rows])


@router.get("/{service}", responses=responses(401, 404, 422))
async def show(service: NamePath, state: State, user: User) -> ServiceDetail:
    """Versions, weights, replicas, the gateway's figures, decisions and figures rows."""
    async with state.db.read() as session:
        row = await svc.get_service(session, service, user.scope, user.project_id)
        return await service_detail(session, row, state.gateway, state.clock())


@router.post("/{service}/rollback", responses=responses(401, 404, 409, 422))
async def rollback(service: NamePath, state: State, user: User) -> ServiceView:
    """End the rollout in progress: the new version's traffic goes back to the stable one."""
    now = state.clock()
    async with state.db.write() as session:
        row = await svc.get_service(session, service, user.scope, user.project_id)
        commands = await svc.roll_back(session, row, "rolled back by hand", now)
        view = await service_view(session, row, state.gateway, now)
    state.hub.send(commands)
    return view


@router.post("/{service}/stop", responses=responses(401, 404, 422))
async def stop(service: NamePath, state: State, user: User) -> ServiceView:
    """Stop every replica; the gateway answers 503 for it. `bourse serve` starts it again."""
    now = state.clock()
    async with state.db.write() as session:
        row = await svc.get_service(session, service, user.scope, user.project_id)
        commands = await svc.stop_service(session, row, now)
        view = await service_view(session, row, state.gateway, now)
    state.gateway.drop(row.project_id, row.name)
    state.hub.send(commands)
    return view
