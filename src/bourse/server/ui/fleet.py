"""The nodes, a node's verification report, the offers the matcher sees, and app runs."""

from __future__ import annotations

from starlette.responses import Response

from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.protocol.api import OfferList, OfferQuery
from bourse.server.routes import offers as api_offers
from bourse.server.services import jobs, nodes
from bourse.server.ui import charts, graph, queries, views
from bourse.server.ui.guard import Ctx, path_id
from bourse.server.ui.render import page

OFFER_FIELDS = ("gpu", "cpus", "memory")  # the Compute shorthand the offers form takes
OFFERS_LIMIT = 50


async def _nodes(ctx: Ctx) -> list[dict[str, object]]:
    async with ctx.state.db.read() as session:
        found = await nodes.list_nodes(session, ctx.scope, set(ctx.state.hub.connections),
                                       ctx.state.clock())
    usage = await charts.node_usage(ctx, [n.id for n in found])
    return [{"node": n, "gpus": views.gpu_summary(n.capabilities), "usage": usage[n.id],
             "reliability": views.reliability_cell(n.reliability)} for n in found]


async def nodes_page(ctx: Ctx) -> Response:
    async with ctx.state.db.read() as session:
        found = await nodes.provider_views(session, ctx.scope, ctx.state.clock())
    return page("nodes.html", **ctx.context(
        nodes=await _nodes(ctx), now=ctx.state.clock(),
        providers=[views.provider_cells(p) for p in found]))


async def nodes_rows(ctx: Ctx) -> Response:
    return page("nodes/_rows.html", **ctx.context(nodes=await _nodes(ctx),
                                                  now=ctx.state.clock()))


async def node_page(ctx: Ctx) -> Response:
    async with ctx.state.db.read() as session:
        node = await nodes.get_node(session, path_id(ctx, "node_id"), ctx.scope,
                                    set(ctx.state.hub.connections), ctx.state.clock())
    return page("node.html", **ctx.context(
        node=node, gpus=views.gpu_summary(node.capabilities),
        reliability=views.reliability_section(node.reliability, node.created_at)))


def compute_of(fields: dict[str, str]) -> Compute:
    """A Compute from the form's shorthand (empty fields left at their defaults)."""
    return Compute(**{name: value for name, value in fields.items() if value})


async def offers_page(ctx: Ctx) -> Response:
    params = ctx.request.query_params
    fields = {name: params.get(name, "").strip()[:200] for name in OFFER_FIELDS}
    result: OfferList | None = None
    error: InvalidInput | None = None
    try:
        compute = compute_of(fields)
    except InvalidInput as exc:
        error, compute = exc, None
    if compute is not None:
        query = OfferQuery(compute=compute, limit=OFFERS_LIMIT, explain=True)
        result = await api_offers.match_offers(query, ctx.state, ctx.session.principal)
    return page("offers.html", 422 if error else 200, **ctx.context(
        fields=fields, result=result, error=error,
        described=compute.describe() if compute is not None else ""))


async def _runs(ctx: Ctx) -> dict[str, object]:
    """The runs (of the apps named like the ``app`` parameter), each with its stages drawn as
    a graph."""
    app = ctx.request.query_params.get("app", "").strip()[:200]
    async with ctx.state.db.read() as session:
        found = await queries.run_jobs(session, ctx.scope, app)
        runs = views.group_runs(jobs.job_view(j) for j in found)
        stages = [s for run in runs for s in run.stages]
        times = await queries.attempt_times(session, [s.job_id for s in stages])
        names = await nodes.node_names(session, ctx.scope, [s.node_id for s in stages])
    now = ctx.state.clock()
    return {"runs": [(run, graph.draw(run, names, times, now)) for run in runs], "now": now,
            "ago": views.ago, "app": app}


async def runs_page(ctx: Ctx) -> Response:
    return page("runs.html", **ctx.context(**await _runs(ctx)))


async def runs_list(ctx: Ctx) -> Response:
    return page("runs/_list.html", **ctx.context(**await _runs(ctx)))
