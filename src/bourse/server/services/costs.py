"""What attempts cost, summed by day, node, job or project (``bourse cost``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from sqlalchemy import case, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.cost import total_cost
from bourse.core.states import AttemptState
from bourse.protocol.api import AttemptView, CostRow, CostSummary
from bourse.server.access import Scope
from bourse.server.db.schema import Attempt, Job, Node
from bourse.server.services.jobs import attempt_view
from bourse.server.services.launch_views import launch_views

MAX_ATTEMPTS = 200_000
By = Literal["day", "node", "job", "project"]


async def summarise(session: AsyncSession, scope: Scope, by: By, since: float | None,
                    now: float) -> CostSummary:
    """Every attempt of the scope's jobs that started (since ``since``), priced, grouped by
    ``by``; nodes of other projects are named by id only."""
    node_name = Node.name if scope.everything else case(
        (Node.project_id == scope.project_id, Node.name), else_=None)
    query = scope.filter(select(Attempt, node_name, Job.project_id)
                         .join(Job, Job.id == Attempt.job_id)
                         .outerjoin(Node, Node.id == Attempt.node_id).where(
        Attempt.started_at.is_not(None)), Job.project_id)
    if since is not None:
        query = query.where(Attempt.started_at >= since)
    rows = (await session.execute(query.order_by(Attempt.started_at).limit(MAX_ATTEMPTS))).all()
    groups: dict[str, list[AttemptView]] = {}
    for attempt, node_name, project_id in rows:
        view = attempt_view(attempt, node_name, now)
        key = project_id if by == "project" else _key(by, attempt, node_name)
        groups.setdefault(key, []).append(view)
    return CostSummary(by=by, since=since, rows=[_row(k, v) for k, v in groups.items()],
                       total=_row("total", [v for vs in groups.values() for v in vs]),
                       launched=await launch_views(session, scope, now, since=since))


def _key(by: str, attempt: Attempt, node_name: str | None) -> str:
    if by == "node":
        return node_name or attempt.node_id
    if by == "job":
        return attempt.job_id
    assert attempt.started_at is not None
    return datetime.fromtimestamp(attempt.started_at, UTC).strftime("%Y-%m-%d")


def _row(key: str, views: Sequence[AttemptView]) -> CostRow:
    spot = [v for v in views if v.spot]
    return CostRow(key=key, attempts=len(views), cost=sum(v.cost or 0.0 for v in views),
                   on_demand_cost=total_cost([v.on_demand_cost for v in views]),
                   lost_work_s=sum(v.lost_work_s or 0.0 for v in views),
                   preempted=sum(v.state == AttemptState.PREEMPTED.value for v in views),
                   spot_cost=sum(v.cost or 0.0 for v in spot),
                   spot_on_demand_cost=total_cost([v.on_demand_cost for v in spot]))
