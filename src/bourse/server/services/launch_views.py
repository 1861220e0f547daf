"""Launched nodes as the API shows them: state, and what each cost from launch to termination,
split into boot, busy (attempts ran) and idle time (``bourse cost``, ``bourse launches``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.states import LaunchState
from bourse.protocol.clouds import LaunchView
from bourse.server.access import Scope
from bourse.server.db.schema import Attempt, Launch, Node

MAX_LAUNCHES = 10_000


async def launch_views(session: AsyncSession, scope: Scope, now: float, *,
                       since: float | None = None, live_only: bool = False) -> list[LaunchView]:
    query = scope.filter(select(Launch, Node.name).outerjoin(Node, Node.id == Launch.node_id),
                         Launch.project_id)
    if since is not None:
        query = query.where((Launch.terminated_at.is_(None)) | (Launch.terminated_at >= since))
    if live_only:
        query = query.where(Launch.state.not_in((LaunchState.TERMINATED, LaunchState.FAILED)))
    rows = (await session.execute(query.order_by(Launch.requested_at.desc())
                                  .limit(MAX_LAUNCHES))).all()
    spans = await _attempt_spans(session, [launch.node_id for launch, _ in rows], now)
    return [view(launch, name, spans.get(launch.node_id, []), now) for launch, name in rows]


def view(launch: Launch, node_name: str | None, spans: Sequence[tuple[float, float]],
         now: float) -> LaunchView:
    up = up_seconds(launch, now)
    busy = min(_within(spans, launch.launched_at, launch.terminated_at or now), up)
    boot = _booting(launch, now)  # still booting: the time so far
    if launch.launched_at is not None and launch.enrolled_at is not None:
        boot = max(0.0, launch.enrolled_at - launch.launched_at)
    return LaunchView(
        id=launch.id, node_id=launch.node_id, node_name=node_name, job_id=launch.job_id,
        project=launch.project_id, provider=launch.provider, region=launch.region,
        zone=launch.zone, instance_type=launch.instance_type, spot=launch.spot,
        price=launch.price, on_demand=launch.on_demand, instance_id=launch.instance_id,
        state=LaunchState(launch.state), requested_at=launch.requested_at,
        launched_at=launch.launched_at, enrolled_at=launch.enrolled_at,
        terminated_at=launch.terminated_at, reason=launch.reason,
        cost=up / 3600 * launch.price, up_s=up, boot_s=boot, busy_s=busy,
        idle_s=max(0.0, up - busy - (boot or 0.0)))


def up_seconds(launch: Launch, now: float) -> float:
    """How long the instance has cost: from the launch call's answer (a failed launch never
    cost) to its termination, or now."""
    if launch.launched_at is None:
        return 0.0
    return max(0.0, (launch.terminated_at or now) - launch.launched_at)


def _booting(launch: Launch, now: float) -> float | None:
    """Still booting: the time so far."""
    if launch.launched_at is None or launch.enrolled_at is not None:
        return None
    return max(0.0, (launch.terminated_at or now) - launch.launched_at)


def _within(spans: Sequence[tuple[float, float]], start: float | None, end: float) -> float:
    """Seconds of ``spans`` (attempts, start to end) inside [start, end]."""
    if start is None:
        return 0.0
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans)


async def _attempt_spans(session: AsyncSession, node_ids: Sequence[str],
                         now: float) -> dict[str, list[tuple[float, float]]]:
    if not node_ids:
        return {}
    rows = (await session.execute(select(Attempt.node_id, Attempt.started_at, Attempt.ended_at)
                                  .where(Attempt.node_id.in_(set(node_ids)),
                                         Attempt.started_at.is_not(None)))).all()
    found: dict[str, list[tuple[float, float]]] = {}
    for node_id, started, ended in rows:
        if started is not None:
            found.setdefault(node_id, []).append((started, ended or now))
    return found
