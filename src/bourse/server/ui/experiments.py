"""Experiment tracking's pages: the experiments, an experiment's runs (searched with MLflow's
syntax), a run's curves beside its system metrics, and the comparison of several runs; the
curves come from JSON feeds downsampled on the server (``services.tracking_charts``)."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.responses import Response

from bourse.core.errors import InvalidInput, NotFound
from bourse.core.runsearch import SearchError
from bourse.protocol.tracking import RunView, TrackedRunDetail
from bourse.server.services import tracking as t
from bourse.server.services import tracking_charts as tc
from bourse.server.services import tracking_search as ts
from bourse.server.services import tracking_views as tv
from bourse.server.ui import artifacts, comparison, queries
from bourse.server.ui.guard import Ctx, int_param, path_id
from bourse.server.ui.render import json_response, page

LIST_LIMIT = 500  # an experiment's page lists this many runs
COMPARE_LIMIT = 1000  # the comparison of a search takes this many runs
PICKED_LIMIT = 100  # runs named one by one (``?run=``), as the chart API takes
CHART_RUNS = 20  # the comparison overlays the curves of its first this many runs
CHART_KEYS = 20
POINTS = 1000  # per curve on a run's page (downsampled on the server)
COMPARE_POINTS = 400  # per curve on the comparison page


def _writer(ctx: Ctx) -> t.Writer:
    return t.writer_of(ctx.session.principal.project_id, ctx.scope)


async def experiments_page(ctx: Ctx) -> Response:
    async with ctx.state.db.write() as session:
        await t.ensure_default(session, ctx.session.principal.project_id, ctx.state.clock())
        rows = await t.list_experiments(session, ctx.scope)
        found = [tv.experiment_view(r) for r in rows]
    return page("experiments.html", **ctx.context(experiments=found))


def _search_fields(ctx: Ctx) -> tuple[str, str]:
    params = ctx.request.query_params
    return params.get("filter", "").strip()[:4000], params.get("order", "").strip()[:200]


async def _search(ctx: Ctx, experiment_ids: Sequence[str], text: str, order: str,
                  limit: int) -> tuple[list[RunView], bool]:
    async with ctx.state.db.read() as session:
        runs, more = await ts.search_runs(session, ctx.scope, experiment_ids, text or None,
                                          [order] if order else [], limit=limit, offset=0)
        return await queries.run_table(session, runs), more


async def runs_page(ctx: Ctx) -> Response:
    """An experiment's runs, by MLflow's search syntax; a bad filter is shown beside the box."""
    experiment_id = path_id(ctx, "experiment_id")
    async with ctx.state.db.write() as session:
        experiment = tv.experiment_view(await t.get_experiment(
            session, _writer(ctx), experiment_id, ctx.state.clock()))
    text, order = _search_fields(ctx)
    runs: list[RunView] = []
    more, error = False, None
    try:
        runs, more = await _search(ctx, [experiment_id], text, order, LIST_LIMIT)
    except SearchError as exc:
        error = exc
    return page("experiment.html", 422 if error else 200, **ctx.context(
        experiment=experiment, filter=text, order=order, error=error, more=more,
        table=comparison.table(runs), limit=LIST_LIMIT))


async def _detail(ctx: Ctx, run_id: str) -> tuple[TrackedRunDetail, str]:
    """The run as its page shows it, and its project."""
    async with ctx.state.db.write() as session:  # a job's run is made when first asked for
        run = await t.job_run(session, _writer(ctx), run_id, ctx.state.clock())
        data = (await t.run_data(session, [run]))[0]
        return await tv.run_detail(session, data, ctx.scope, ctx.state.clock()), run.project_id


async def run_page(ctx: Ctx) -> Response:
    run, project = await _detail(ctx, path_id(ctx, "run_id"))
    stored = await artifacts.run_artifacts(ctx, project, run.run_id)
    return page("tracked_run.html", **ctx.context(
        run=run, params=sorted(run.params.items()), tags=comparison.visible_tags(run.tags),
        keys=sorted(run.metrics)[:CHART_KEYS], more_keys=max(0, len(run.metrics) - CHART_KEYS),
        metric_text=comparison.metric_text, artifacts=stored, size_text=artifacts.size_text))


def _points(ctx: Ctx, default: int) -> int:
    return max(3, int_param(ctx, "points", default, 10_000))


async def run_curves(ctx: Ctx) -> Response:
    """The run's curves, a chart per metric key (the first ``CHART_KEYS`` of them), and the
    steps where a job's run moved (``comparison.move_marks``)."""
    run_id = path_id(ctx, "run_id")
    points = _points(ctx, POINTS)
    async with ctx.state.db.read() as session:
        data = (await t.run_data(session, await tv.visible_runs(session, ctx.scope, [run_id])))
        keys = sorted(m.key for m in data[0].latest)[:CHART_KEYS]
        found = [tv.series_view(s) for s in await tc.compare(session, [run_id], keys, points)]
        job_id = data[0].run.job_id  # a job's run: the moves of its bursts are marked
        moves = await tv.moves_of(session, job_id) if job_id else []
    charts = comparison.overlays(found, keys, {run_id: data[0].run.name or run_id})
    return json_response({"charts": [c.as_json() for c in charts],
                          "moves": comparison.move_marks(moves)})


def _picked(ctx: Ctx) -> list[str]:
    picked = list(dict.fromkeys(ctx.request.query_params.getlist("run")))
    if len(picked) > PICKED_LIMIT:
        raise InvalidInput(f"at most {PICKED_LIMIT} runs by id; compare a search instead",
                           field="run")
    for run_id in picked:
        if len(run_id) > 64:
            raise NotFound(f"no run {run_id[:64]!r} in this project")
    return picked


async def _picked_runs(ctx: Ctx, run_ids: Sequence[str]) -> list[RunView]:
    async with ctx.state.db.read() as session:
        return await queries.run_table(session, await tv.visible_runs(session, ctx.scope,
                                                                      run_ids))


async def compare_page(ctx: Ctx) -> Response:
    """Runs picked by id (``?run=``), or those of a search (``?experiment=&filter=``)."""
    picked = _picked(ctx)
    experiments = ctx.request.query_params.getlist("experiment")[:100]
    text, order = _search_fields(ctx)
    runs: list[RunView] = []
    more, error = False, None
    try:
        if picked:
            runs = await _picked_runs(ctx, picked)
        elif experiments or text:
            runs, more = await _search(ctx, experiments, text, order, COMPARE_LIMIT)
    except SearchError as exc:
        error = exc
    charted = runs[:CHART_RUNS]
    return page("compare.html", 422 if error else 200, **ctx.context(
        table=comparison.table(runs), charted=charted, more=more, error=error, filter=text,
        order=order, experiments=experiments, keys=comparison.keys_of(
            r.metrics for r in charted)[:CHART_KEYS], limit=COMPARE_LIMIT,
        chart_runs=CHART_RUNS))


async def compare_curves(ctx: Ctx) -> Response:
    """The overlaid curves of ``?run=`` (at most ``CHART_RUNS``), a chart per ``?key=``."""
    run_ids = _picked(ctx)[:CHART_RUNS]
    keys = list(dict.fromkeys(ctx.request.query_params.getlist("key")))[:CHART_KEYS]
    if not run_ids or not keys:
        raise InvalidInput("name the runs (?run=) and the metric keys (?key=) to chart")
    points = _points(ctx, COMPARE_POINTS)
    async with ctx.state.db.read() as session:
        runs = await tv.visible_runs(session, ctx.scope, run_ids)
        found = [tv.series_view(s) for s in await tc.compare(session, run_ids, keys, points)]
    labels = {r.id: r.name or r.id for r in runs}
    return json_response({"charts": [c.as_json() for c in comparison.overlays(
        found, keys, labels)]})
