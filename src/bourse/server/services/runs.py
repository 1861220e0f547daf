"""App runs: the jobs that carry one run id (``JobSpec.run``), summed up as a run."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core import dataflow
from bourse.core.errors import NotFound
from bourse.core.states import JobState
from bourse.protocol.api import JobView, RunDetail, RunEdge, RunView
from bourse.server.access import Scope
from bourse.server.db.schema import Job
from bourse.server.services.jobs import job_view


def summarise(run_id: str, jobs: Sequence[JobView]) -> RunView:
    """A run from its jobs, oldest first (pure)."""
    driver = next((j for j in jobs if j.spec.stage is None), None)
    stages = [j for j in jobs if j.spec.stage is not None]
    ended = all(JobState(j.state).terminal for j in jobs)
    if driver is not None:
        state = driver.state
    elif not ended:
        state = "RUNNING"
    else:
        state = jobs[-1].state  # a flow stops at its first failed stage
    costs = [j.cost for j in jobs if j.cost is not None]
    return RunView(id=run_id, app=(driver or jobs[0]).spec.app, state=state,
                   stages=len(stages), started_at=jobs[0].created_at,
                   ended_at=max(j.updated_at for j in jobs) if ended else None,
                   cost=sum(costs) if costs else None,
                   driver=driver.id if driver else None)


def stage_edges(jobs: Sequence[JobView]) -> list[RunEdge]:
    """The dependencies between a run's stages (pure): each stage is its latest job, in the
    order those were submitted."""
    latest: dict[str, JobView] = {}
    for job in sorted(jobs, key=lambda j: (j.created_at, j.id)):
        if job.spec.stage is not None:
            latest.pop(job.spec.stage, None)  # a retry takes the place of the job before it
            latest[job.spec.stage] = job
    stages = [dataflow.StageData(stage, j.spec.inputs, j.spec.outputs)
              for stage, j in latest.items()]
    return [RunEdge(source=e.source, target=e.target, inputs=list(e.inputs))
            for e in dataflow.edges(stages)]


def app_matches(text: str) -> ColumnElement[bool]:
    """Jobs whose app (``JobSpec.app``, the app's file name) contains ``text``, ignoring
    case."""
    return func.lower(Job.spec["app"].as_string()).contains(text.lower(), autoescape=True)


async def list_runs(session: AsyncSession, scope: Scope, limit: int,
                    app: str | None = None) -> list[RunView]:
    """The newest ``limit`` runs the caller's project may see, newest first; with ``app``,
    only the runs of apps whose name contains it."""
    started = func.min(Job.created_at)
    newest = scope.filter(select(Job.run), Job.project_id).where(Job.run.is_not(None))
    if app:
        newest = newest.where(app_matches(app))
    newest = newest.group_by(Job.run).order_by(started.desc()).limit(limit)
    ids = [r for r in (await session.scalars(newest)).all() if r is not None]
    rows = (await session.scalars(scope.filter(select(Job), Job.project_id)
                                  .where(Job.run.in_(ids))
                                  .order_by(Job.created_at, Job.id))).all()
    by_run: dict[str, list[JobView]] = {run: [] for run in ids}
    for row in rows:
        assert row.run is not None
        by_run[row.run].append(job_view(row))
    return [summarise(run, by_run[run]) for run in ids]


async def run_detail(session: AsyncSession, run_id: str, scope: Scope) -> RunDetail:
    rows = (await session.scalars(scope.filter(select(Job), Job.project_id)
                                  .where(Job.run == run_id)
                                  .order_by(Job.created_at, Job.id))).all()
    if not rows:
        raise NotFound(f"no run {run_id!r}", hint="`bourse runs` lists runs")
    jobs = [job_view(row) for row in rows]
    return RunDetail(**summarise(run_id, jobs).model_dump(), jobs=jobs,
                     edges=stage_edges(jobs))
