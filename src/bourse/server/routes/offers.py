"""``/api/v1/offers``: the matcher over live nodes' free capacity, with its explanation, or
what the exchange's clouds could launch now (``launchable``)."""

from __future__ import annotations

from fastapi import APIRouter

from bourse.core.match import Match, explain, match
from bourse.protocol.api import OfferList, OfferQuery, OfferView
from bourse.server.errors import responses
from bourse.server.launcher.launchable import NO_CLOUDS, launchable
from bourse.server.routes.deps import State, User
from bourse.server.services.capacity import live_capacity, node_offers, public_offer

router = APIRouter(prefix="/api/v1", tags=["offers"])


@router.post("/offers", responses=responses(400, 401, 413, 422))
async def match_offers(query: OfferQuery, state: State, user: User) -> OfferList:
    """The market: every project sees every node's free capacity, but a node of another
    project only under an opaque offer id, without its node id or name. With ``launchable``,
    what the exchange's clouds could launch for the caller's project now instead."""
    if query.launchable:
        return await _launchable(query, state, user.project_id)
    async with state.db.read() as session:
        frees = await live_capacity(session, state.config.allow_unverified)
    offers = [public_offer(o, f.node.project_id, user.scope) for f in frees
              for o in node_offers(f)]
    found = match(query.compute, offers, limit=query.limit)
    lines = explain(query.compute, offers).lines() if query.explain or not found else None
    return OfferList(offers=[_view(m) for m in found], explanation=lines)


async def _launchable(query: OfferQuery, state: State, project_id: str) -> OfferList:
    if state.launcher is None:
        return OfferList(offers=[], explanation=[NO_CLOUDS])
    found = await launchable(state.launcher, query.compute, project_id, query.limit,
                             query.explain)
    return OfferList(offers=[_view(m) for m in found.places], explanation=found.notes or None)


def _view(m: Match) -> OfferView:
    o = m.offer
    return OfferView(id=o.id, provider=o.provider, instance_type=o.instance_type,
                     node_id=o.node_id, region=o.region, gpu=o.gpu, gpu_count=o.gpu_count,
                     cpus=o.cpus, memory_gib=o.memory_gib, price_per_hour=m.price, spot=m.spot,
                     verified_at=o.verified_at.timestamp() if o.verified_at else None,
                     gpu_memory_mib=o.gpu_memory_mib, gpu_slice=o.gpu_slice, zone=o.zone,
                     sla=o.sla)
