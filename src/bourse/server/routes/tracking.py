"""``/api/v1/tracking``: experiments, runs and their curves for the UI and the CLI."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import InvalidInput, NotFound
from bourse.protocol.metrics import MetricsView
from bourse.protocol.tracking import (
    ChartView,
    ExperimentList,
    RunList,
    SeriesView,
    TrackedRunDetail,
)
from bourse.protocol.tracking_debug import GradientView
from bourse.server.access import Scope
from bourse.server.db.schema import TrackingRun
from bourse.server.errors import responses
from bourse.server.routes.deps import State, User
from bourse.server.services import jobs, metrics
from bourse.server.services import tracking as t
from bourse.server.services import tracking_charts as tc
from bourse.server.services import tracking_debug as td
from bourse.server.services import tracking_search as ts
from bourse.server.services import tracking_views as tv

router = APIRouter(prefix="/api/v1/tracking", tags=["tracking"])
RunId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.:-]+$", max_length=64)]
Key = Annotated[str, Path(min_length=1, max_length=250)]
Points = Annotated[int, Query(ge=3, le=10_000, description="downsample to at most this many")]
Ids = Annotated[list[str], Query(max_length=100)]


@router.get("/experiments", responses=responses(401))
async def list_experiments(state: State, user: User) -> ExperimentList:
    async with state.db.write() as session:
        await t.ensure_default(session, user.project_id, state.clock())
        rows = await t.list_experiments(session, user.scope)
        return ExperimentList(experiments=[tv.experiment_view(r) for r in rows])


@router.get("/runs", responses=responses(401, 422))
async def search_runs(state: State, user: User, *, experiment_id: Ids = [],  # noqa: B006
                      filter: Annotated[str | None, Query(max_length=4000)] = None,
                      order_by: Annotated[list[str], Query(max_length=10)] = [],  # noqa: B006
                      limit: Annotated[int, Query(ge=1, le=5000)] = 100,
                      offset: Annotated[int, Query(ge=0)] = 0) -> RunList:
    """Runs by MLflow's search syntax (``metrics.loss < 0.2 and params.lr = "1e-3"``),
    ordered by ``order_by`` (``metrics.loss ASC``), newest first otherwise."""
    async with state.db.read() as session:
        runs, more = await ts.search_runs(session, user.scope, experiment_id, filter, order_by,
                                          limit=limit, offset=offset)
        found = await t.run_data(session, runs)
    return RunList(runs=[tv.run_view(d) for d in found],
                   next_offset=offset + len(found) if more else None)


@router.get("/runs/{tracking_run}", responses=responses(401, 404, 422))
async def get_run(tracking_run: RunId, state: State, user: User) -> TrackedRunDetail:
    """A run with its params, tags and latest metrics; a job's with its priced attempts."""
    writer = t.writer_of(user.project_id, user.scope)
    async with state.db.write() as session:
        run = await t.job_run(session, writer, tracking_run, state.clock())
        return await tv.run_detail(session, (await t.run_data(session, [run]))[0], user.scope,
                                   state.clock())


@router.get("/runs/{tracking_run}/metrics/{key:path}", responses=responses(401, 404, 422))
async def metric_series(tracking_run: RunId, key: Key, state: State, user: User,
                        points: Points = 1000) -> SeriesView:
    """One metric's curve, downsampled (LTTB) to at most ``points`` points."""
    async with state.db.read() as session:
        await _visible(session, user.scope, [tracking_run])
        return tv.series_view(await tc.series(session, tracking_run, key, points))


@router.get("/runs/{tracking_run}/system", responses=responses(401, 404, 422))
async def system_metrics(tracking_run: RunId, state: State, user: User) -> MetricsView:
    """The resource samples of the run's job (minute means past a few hours)."""
    async with state.db.read() as session:
        run = await _visible(session, user.scope, [tracking_run])
        job_id = run[0].job_id
        if job_id is None:
            raise NotFound(f"run {tracking_run} is not a job's; it has no system metrics")
        await jobs.get_job(session, job_id, user.scope)
        samples = await metrics.job_metrics(session, job_id, 0.0, 50_000)
    return MetricsView(job_id=job_id, samples=samples)


@router.get("/runs/{tracking_run}/gradients", responses=responses(401, 404, 422))
async def gradients(tracking_run: RunId, state: State, user: User, *,
                    low: Annotated[float, Query(gt=0, description="vanishing below")] = 1e-7,
                    high: Annotated[float, Query(gt=0, description="exploding above")] = 1e3,
                    columns: Annotated[int, Query(ge=2, le=500)] = 60) -> GradientView:
    """Gradient flow: per-layer gradient norms as a layer × step grid, the layers out of
    [low, high], and the model graph the run logged."""
    if not low < high:
        raise InvalidInput(f"low ({low}) must be below high ({high})", field="low")
    async with state.db.read() as session:
        await _visible(session, user.scope, [tracking_run])
        return await td.gradients(session, tracking_run, low=low, high=high, columns=columns)


@router.get("/chart", responses=responses(401, 404, 422))
async def chart(state: State, user: User, run: Annotated[list[str], Query(
        min_length=1, max_length=100)], key: Annotated[list[str], Query(
        min_length=1, max_length=20)], points: Points = 1000) -> ChartView:
    """Several runs' curves of the same keys in one call (the comparison view)."""
    async with state.db.read() as session:
        await _visible(session, user.scope, run)
        found = await tc.compare(session, run, key, points)
    return ChartView.model_construct(series=[tv.series_view(s) for s in found])


async def _visible(session: AsyncSession, scope: Scope,
                   run_ids: list[str]) -> list[TrackingRun]:
    return await tv.visible_runs(session, scope, run_ids)
