"""``/api/v1/offers``: the matcher over live nodes' free capacity, with its explanation."""

from __future__ import annotations

from fastapi import APIRouter

from bourse.core.match import explain, match
from bourse.protocol.api import OfferList, OfferQuery, OfferView
from bourse.server.errors import responses
from bourse.server.routes.deps import State, User
from bourse.server.services.capacity import live_capacity, node_offers, public_offer

router = APIRouter(prefix="/api/v1", tags=["offers"])


@router.post("/offers", responses=responses(400, 401, 413, 422))
async def match_offers(query: OfferQuery, state: State, user: User) -> OfferList:
    """The market: every project sees every node's free capacity, but a node of another
    project only under an opaque offer id, without its node id or name."""
    async with state.db.read() as session:
        frees = await live_capacity(session, state.config.allow_unverified)
    offers = [public_offer(o, f.node.project_id, user.scope) for f in frees
              for o in node_offers(f)]
    found = match(query.compute, offers, limit=query.limit)
    views = [OfferView(id=m.offer.id, provider=m.offer.provider,
                       instance_type=m.offer.instance_type, node_id=m.offer.node_id,
                       region=m.offer.region, gpu=m.offer.gpu, gpu_count=m.offer.gpu_count,
                       cpus=m.offer.cpus, memory_gib=m.offer.memory_gib,
                       price_per_hour=m.price, spot=m.spot,
                       verified_at=m.offer.verified_at.timestamp() if m.offer.verified_at
                       else None, gpu_memory_mib=m.offer.gpu_memory_mib,
                       gpu_slice=m.offer.gpu_slice) for m in found]
    lines = explain(query.compute, offers).lines() if query.explain or not found else None
    return OfferList(offers=views, explanation=lines)
