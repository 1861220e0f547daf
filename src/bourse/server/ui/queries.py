"""The few reads the pages need that the API's services do not offer: searching jobs by name or
id, the jobs that belong to app runs (by app) and when their
current attempts ran, and a runs table's params and metrics."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.protocol.tracking import LatestMetric, RunView
from bourse.server.access import Scope
from bourse.server.db.schema import Attempt, Job, TrackingLatest, TrackingParam, TrackingRun
from bourse.server.services import runs

RUN_JOBS_LIMIT = 2000  # the runs page shows the runs of the newest this many named jobs


async def search_jobs(session: AsyncSession, scope: Scope, state: str | None, text: str,
                      limit: int) -> Sequence[Job]:
    """Newest first; ``text`` matches anywhere in the name or the id, ignoring case."""
    query = scope.filter(select(Job), Job.project_id).order_by(
        Job.created_at.desc(), Job.id.desc()).limit(limit)
    if state is not None:
        query = query.where(Job.state == state)
    if text:
        needle = text.lower()
        query = query.where(or_(func.lower(Job.name).contains(needle, autoescape=True),
                                func.lower(Job.id).contains(needle, autoescape=True)))
    return (await session.scalars(query)).all()


async def run_jobs(session: AsyncSession, scope: Scope, app: str = "",
                   limit: int = RUN_JOBS_LIMIT) -> Sequence[Job]:
    """The newest jobs of app runs (``JobSpec.run``); with ``app``, of apps whose name
    contains it."""
    query = scope.filter(select(Job), Job.project_id).where(Job.run.is_not(None))
    if app:
        query = query.where(runs.app_matches(app))
    query = query.order_by(Job.created_at.desc(), Job.id.desc()).limit(limit)
    return (await session.scalars(query)).all()


async def attempt_times(session: AsyncSession,
                        job_ids: Iterable[str]) -> dict[str, tuple[float | None, float | None]]:
    """When each job's current attempt started and ended (jobs not placed yet are left out);
    the ids come from a query already narrowed to the caller's project."""
    wanted = set(job_ids)
    if not wanted:
        return {}
    current = and_(Attempt.job_id == Job.id, Attempt.number == Job.attempt,
                   Attempt.rank == 0)  # a gang's: its rank 0's
    rows = await session.execute(select(Attempt.job_id, Attempt.started_at, Attempt.ended_at)
                                 .join(Job, current).where(Job.id.in_(wanted)))
    return {row[0]: (row[1], row[2]) for row in rows}


async def run_table(session: AsyncSession, runs: Sequence[TrackingRun]) -> list[RunView]:
    """The runs with their params and latest metrics (not their tags), what a runs table
    shows: read as plain rows and built without validation (typed columns of our own
    tables), since a comparison holds a thousand runs and ORM objects cost ~1 ms each."""
    ids = [r.id for r in runs]
    params: dict[str, dict[str, str]] = {i: {} for i in ids}
    latest: dict[str, dict[str, LatestMetric]] = {i: {} for i in ids}
    for run_id, key, value in await session.execute(select(
            TrackingParam.run_id, TrackingParam.key, TrackingParam.value).where(
            TrackingParam.run_id.in_(ids))):
        params[run_id][key] = value
    for run_id, key, number, step, timestamp, count in await session.execute(select(
            TrackingLatest.run_id, TrackingLatest.key, TrackingLatest.value,
            TrackingLatest.step, TrackingLatest.timestamp, TrackingLatest.count).where(
            TrackingLatest.run_id.in_(ids))):
        latest[run_id][key] = LatestMetric.model_construct(
            value=number, step=step, timestamp=timestamp, count=count)
    return [RunView.model_construct(
        run_id=r.id, experiment_id=r.experiment_id, name=r.name, status=r.status,
        lifecycle_stage=r.lifecycle_stage, start_time=r.start_time, end_time=r.end_time,
        job_id=r.job_id, params=params[r.id], tags={}, metrics=latest[r.id]) for r in runs]
