"""``/api/v1/cost``: what attempts cost, by day, node or job."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from bourse.protocol.api import CostSummary
from bourse.server.errors import responses
from bourse.server.routes.deps import State, User
from bourse.server.services import costs

router = APIRouter(prefix="/api/v1", tags=["cost"])


@router.get("/cost", responses=responses(401, 422))
async def cost_summary(state: State, user: User,
               by: Annotated[Literal["day", "node", "job", "project"], Query()] = "day",
               since: Annotated[float | None, Query(ge=0, le=1e11)] = None) -> CostSummary:
    async with state.db.read() as session:
        return await costs.summarise(session, user.scope, by, since, state.clock())
