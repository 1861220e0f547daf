"""``/api/v1/jobs/{id}/metrics`` and ``/api/v1/nodes/{id}/metrics``: resource samples."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from bourse.core.compute import MAX_NODES
from bourse.protocol.common import ID_PATTERN
from bourse.protocol.metrics import MetricsView, StallView
from bourse.server.errors import responses
from bourse.server.routes.deps import State, User
from bourse.server.services import jobs, metrics, nodes

router = APIRouter(prefix="/api/v1", tags=["metrics"])
Id = Annotated[str, Path(pattern=ID_PATTERN, max_length=64)]
Since = Annotated[float, Query(ge=0, le=2**40, description="UNIX seconds: samples from then")]
Limit = Annotated[int, Query(ge=1, le=50_000, description="at most this many, the newest")]
Rank = Annotated[int | None, Query(ge=0, lt=MAX_NODES, description="one gang member's")]


@router.get("/jobs/{job_id}/metrics", responses=responses(401, 404, 422))
async def job_metrics(job_id: Id, state: State, user: User, *, since: Since = 0.0,
                      limit: Limit = 5000, rank: Rank = None) -> MetricsView:
    """The resource samples of a job of the caller's project, oldest first: raw ones
    (``period_s`` 0) for the last hours, minute means before that, each naming the gang
    member it is of (``rank``; ``?rank=`` for one member's); and its stall evidence while it
    is stalled."""
    async with state.db.read() as session:
        job = await jobs.get_member(session, job_id, user.scope, rank)
        samples = await metrics.job_metrics(session, job_id, since, limit, rank)
    stalled = jobs.stalled_in(job)
    return MetricsView(job_id=job_id, samples=samples,
                       stalled=StallView.model_validate(stalled) if stalled else None)


@router.get("/nodes/{node_id}/metrics", responses=responses(401, 404, 422))
async def node_metrics(node_id: Id, state: State, user: User, since: Since = 0.0,
                       limit: Limit = 5000) -> MetricsView:
    """The node's own samples (the whole machine, every GPU, the cache, the disks), for the
    node's project (its provider) and admins."""
    async with state.db.read() as session:
        await nodes.get_node(session, node_id, user.scope, set())
        samples = await metrics.node_metrics(session, node_id, since, limit)
    return MetricsView(node_id=node_id, samples=samples)
