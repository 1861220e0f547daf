"""App runs: the jobs that carry one run id (``JobSpec.run``), summed up as a run; and the
run's driver lease, which ends a run whose driver is gone.

The driver — ``bourse run app.py`` in a terminal, or a detached run's driver job — renews
its run's lease every ``renew_every_s`` (a third of the lease). Stopped (SIGHUP, SIGTERM,
Ctrl-C) it cancels its run itself; killed outright, or on a machine that is gone, it falls
silent, and ``expire_runs`` cancels the run once the lease lapses. Cancelling a run cancels
its jobs that have not ended, and later submits to it are refused. A run whose driver never
renewed (an older client) has no lease and is never expired.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core import dataflow
from bourse.core.errors import Conflict, NotFound
from bourse.core.states import JOB_LIVE, JobState
from bourse.protocol.api import JobView, RunCancelled, RunDetail, RunEdge, RunLease, RunView
from bourse.server.access import Scope
from bourse.server.commands import Command
from bourse.server.db.schema import Job, Run
from bourse.server.services.jobs import cancel_row, job_view
from bourse.server.services.nodes import named

EXPIRE_BATCH = 100


def summarise(run_id: str, jobs: Sequence[JobView], lease: Run | None = None) -> RunView:
    """A run from its jobs, oldest first, and its lease if it has one (pure)."""
    driver = next((j for j in jobs if j.spec.stage is None), None)
    stages = [j for j in jobs if j.spec.stage is not None]
    ended = all(j.state.terminal for j in jobs)
    cancelled = lease.cancelled if lease is not None else None
    if cancelled is not None:
        state = JobState.CANCELLED
    elif driver is not None:
        state = driver.state
    elif not ended:
        state = JobState.RUNNING
    else:
        state = jobs[-1].state  # a flow stops at its first failed stage
    costs = [j.cost for j in jobs if j.cost is not None]
    return RunView(id=run_id, app=(driver or jobs[0]).spec.app, state=state,
                   stages=len(stages), started_at=jobs[0].created_at,
                   ended_at=max(j.updated_at for j in jobs) if ended else None,
                   cost=sum(costs) if costs else None,
                   driver=driver.id if driver else None, cancelled=cancelled)


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
    project: dict[str, str] = {}
    for row in rows:
        assert row.run is not None
        by_run[row.run].append(job_view(row))
        project.setdefault(row.run, row.project_id)
    leases = {(r.project_id, r.id): r for r in (await session.scalars(
        scope.filter(select(Run), Run.project_id).where(Run.id.in_(ids)))).all()}
    return [summarise(run, jobs, leases.get((project[run], run)))
            for run, jobs in by_run.items()]


async def run_detail(session: AsyncSession, run_id: str, scope: Scope) -> RunDetail:
    rows = (await session.scalars(scope.filter(select(Job), Job.project_id)
                                  .where(Job.run == run_id)
                                  .order_by(Job.created_at, Job.id))).all()
    if not rows:
        raise NotFound(f"no run {run_id!r}", hint="`bourse runs` lists runs")
    jobs = await named(session, scope, [job_view(row) for row in rows])
    lease = await session.get(Run, (rows[0].project_id, run_id))
    return RunDetail(**summarise(run_id, jobs, lease).model_dump(), jobs=jobs,
                     edges=stage_edges(jobs))


async def renew_lease(session: AsyncSession, run_id: str, project_id: str, now: float,
                      lease_s: float) -> RunLease:
    """Renew (on the first call, take) the run's driver lease for ``lease_s`` more seconds.
    A run that was cancelled or ended is not renewed: its driver learns it is over."""
    lease = await session.get(Run, (project_id, run_id), with_for_update=True)
    if lease is None:
        await _not_foreign(session, run_id, project_id)
        lease = Run(project_id=project_id, id=run_id, created_at=now)
        session.add(lease)
    elif lease.cancelled is not None:
        raise Conflict(f"run {run_id} was cancelled: {lease.cancelled}",
                       hint="its stages were cancelled; run the app again")
    elif lease.ended_at is not None:
        raise Conflict(f"run {run_id} has ended", hint="run the app again")
    lease.lease_until = now + lease_s
    return RunLease(run=run_id, lease_until=lease.lease_until, renew_every_s=lease_s / 3)


async def end_run(session: AsyncSession, run_id: str, project_id: str, now: float) -> None:
    """The driver is done (its flow returned or raised): the lease ends, nothing is
    cancelled (a stage submitted and never waited for runs on)."""
    lease = await session.get(Run, (project_id, run_id), with_for_update=True)
    if lease is None:
        raise NotFound(f"no lease on run {run_id!r}", hint="a driver ends the run it renewed")
    if lease.ended_at is None:
        lease.ended_at, lease.lease_until = now, None


async def cancel_run(session: AsyncSession, run_id: str, scope: Scope, now: float,
                     why: str) -> tuple[RunCancelled, list[Command]]:
    """Cancel the run and its jobs that have not ended; later submits to it are refused."""
    project = await _project_of(session, run_id, scope)
    lease = await session.get(Run, (project, run_id), with_for_update=True)
    if lease is None:  # a run driven by an older client: it gets a row to say it is over
        lease = Run(project_id=project, id=run_id, created_at=now)
        session.add(lease)
    jobs, commands = await _cancel(session, lease, now, why)
    return RunCancelled(run=run_id, reason=lease.cancelled or why, jobs=jobs), commands


async def expire_runs(session: AsyncSession, now: float) -> tuple[list[str], list[Command]]:
    """One pass: cancel the runs whose lease lapsed before ``now``; their ids and the
    commands to send once committed."""
    lapsed = (await session.scalars(
        select(Run).where(Run.lease_until < now).order_by(Run.lease_until)
        .limit(EXPIRE_BATCH).with_for_update(skip_locked=True))).all()
    commands: list[Command] = []
    for lease in lapsed:
        assert lease.lease_until is not None
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(lease.lease_until))
        _, sent = await _cancel(session, lease, now, "its driver (bourse run) stopped renewing "
                                f"the run's lease, which lapsed at {since}")
        commands += sent
    return [lease.id for lease in lapsed], commands


async def _cancel(session: AsyncSession, lease: Run, now: float,
                  why: str) -> tuple[list[str], list[Command]]:
    """Mark the run cancelled and cancel its live jobs: their ids, and what to send."""
    if lease.cancelled is None:
        lease.cancelled = why
    lease.ended_at, lease.lease_until = lease.ended_at or now, None
    live = (await session.scalars(select(Job).where(
        Job.project_id == lease.project_id, Job.run == lease.id, Job.state.in_(sorted(JOB_LIVE)))
        .order_by(Job.created_at, Job.id))).all()
    commands: list[Command] = []
    for job in live:
        commands += cancel_row(session, job, now, f"its app run was cancelled: {why}")
    return [job.id for job in live], commands


async def _not_foreign(session: AsyncSession, run_id: str, project_id: str) -> None:
    """A run id that another project's jobs carry is theirs: as missing as no run."""
    other = await session.scalar(select(Job.project_id).where(
        Job.run == run_id, Job.project_id != project_id).limit(1))
    if other is not None:
        raise NotFound(f"no run {run_id!r}", hint="a driver leases the run it drives")


async def _project_of(session: AsyncSession, run_id: str, scope: Scope) -> str:
    """The project of a run the scope sees: its lease's, or its jobs'."""
    found = await session.scalar(scope.filter(select(Run.project_id), Run.project_id)
                                 .where(Run.id == run_id).limit(1))
    found = found or await session.scalar(scope.filter(select(Job.project_id), Job.project_id)
                                          .where(Job.run == run_id).limit(1))
    if found is None:
        raise NotFound(f"no run {run_id!r}", hint="`bourse runs` lists runs")
    return found
