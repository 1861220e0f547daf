"""Tracking rows as the read API's views (``protocol.tracking``); a job's run joined with its
priced attempts (``services.jobs.job_detail``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import NotFound
from bourse.protocol.tracking import (
    ExperimentView,
    LatestMetric,
    RunMove,
    RunView,
    SeriesView,
    TrackedRunDetail,
)
from bourse.server.access import Scope
from bourse.server.db.schema import Event, Job, TrackingExperiment, TrackingRun
from bourse.server.services.jobs import job_detail
from bourse.server.services.tracking import RunData
from bourse.server.services.tracking_charts import Series


def experiment_view(row: TrackingExperiment) -> ExperimentView:
    return ExperimentView(experiment_id=row.id, name=row.name,
                          lifecycle_stage=row.lifecycle_stage, created_at=row.created_at,
                          tags=row.tags)


def run_view(data: RunData) -> RunView:
    run = data.run
    return RunView(run_id=run.id, experiment_id=run.experiment_id, name=run.name,
                   status=run.status, lifecycle_stage=run.lifecycle_stage,
                   start_time=run.start_time, end_time=run.end_time, job_id=run.job_id,
                   params=data.params, tags=data.tags,
                   metrics={m.key: LatestMetric(value=m.value, step=m.step,
                                                timestamp=m.timestamp, count=m.count)
                            for m in data.latest})


async def run_detail(session: AsyncSession, data: RunData, scope: Scope,
                     now: float) -> TrackedRunDetail:
    view = run_view(data).model_dump()
    job = await session.get(Job, data.run.job_id) if data.run.job_id else None
    if job is None or not scope.sees(job.project_id):
        return TrackedRunDetail(**view)
    detail = await job_detail(session, job, scope, now)
    return TrackedRunDetail(**view, attempts=detail.attempts, cost=detail.cost, job_state=job.state,
                     moves=await moves_of(session, job.id))


async def moves_of(session: AsyncSession, job_id: str) -> list[RunMove]:
    """The job's bursts from its timeline (``moved`` events, ``lifecycle.moved``)."""
    found = await session.scalars(select(Event).where(Event.job_id == job_id,
                                                      Event.kind == "moved").order_by(Event.id))
    return [RunMove(time=e.time, attempt=e.attempt, from_compute=str(e.data.get("from")),
                    to_compute=str(e.data.get("to")), why=e.data.get("why"),
                    step=_step(e.data.get("step"))) for e in found]


def _step(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def series_view(found: Series) -> SeriesView:
    """Built without validation: typed values of our own, and a chart of ten series holds
    10,000 points, which validating cost a tenth of its request."""
    return SeriesView.model_construct(run_id=found.run_id, key=found.key, total=found.total,
                                      points=found.points)


async def visible_runs(session: AsyncSession, scope: Scope,
                       run_ids: Sequence[str]) -> list[TrackingRun]:
    """The runs, every one in the scope, or NotFound naming the first that is not."""
    rows = {r.id: r for r in await session.scalars(scope.filter(
        select(TrackingRun).where(TrackingRun.id.in_(list(run_ids))), TrackingRun.project_id))}
    for run_id in run_ids:
        if run_id not in rows:
            raise NotFound(f"no run {run_id!r} in this project")
    return [rows[r] for r in run_ids]
