"""What is shown of a service: its versions with their weights, replicas and figures (the
gateway's last minute), its decisions and its figures rows."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from bourse.protocol.services import ServiceDetail, ServicePolicy, ServiceView, VersionView
from bourse.server.db.schema import ServiceRow
from bourse.server.services import serving as svc
from bourse.server.serving.gateway import Gateway

GATEWAY_PREFIX = "/svc"


def url_of(service: ServiceRow) -> str:
    return f"{GATEWAY_PREFIX}/{service.project_id}/{service.name}/"


async def service_view(session: AsyncSession, service: ServiceRow, gateway: Gateway,
                       now: float) -> ServiceView:
    versions = await svc.versions_of(session, service.id)
    canary = next((v for v in versions if v.number == service.canary), None)
    steps = ServicePolicy.model_validate(canary.policy).steps if canary else None
    weights = svc.weights_of(service, steps)
    route = gateway.route(service.project_id, service.name)
    replicas = await svc.live_replicas(session, service.id)
    shown = []
    for v in versions:
        if v.number not in weights and v.number != versions[-1].number and len(versions) > 3:
            continue  # old versions: the last three and the live ones
        mine = [j for r, j in replicas if r.version == v.number and not j.cancel_requested]
        ready = 0 if route is None else sum(
            1 for r in route.replicas.values() if r.info.version == v.number and r.ready)
        figures = {} if route is None else route.figures(v.number, now).as_dict()
        shown.append(VersionView(number=v.number, digest=v.digest[:12], state=v.state,
                                 weight=weights.get(v.number, 0), replicas=len(mine),
                                 ready=ready, figures=figures, created_at=v.created_at,
                                 reason=v.reason))
    return ServiceView(name=service.name, project=service.project_id,
                       state=service.state,
                       url=url_of(service), stable=service.stable, canary=service.canary,
                       step=service.step, versions=shown, created_at=service.created_at)


async def service_detail(session: AsyncSession, service: ServiceRow, gateway: Gateway,
                         now: float) -> ServiceDetail:
    view = await service_view(session, service, gateway, now)
    events = await svc.service_events(session, service.id, skip="figures")
    series = await svc.service_events(session, service.id, kind="figures", limit=720)
    return ServiceDetail(**view.model_dump(), events=[svc.event_view(e) for e in events],
                         series=[{"time": e.time, **e.data} for e in series])
