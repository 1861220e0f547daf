"""The jobs list and the job page, their fragments, the log feed and the cancel button."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.responses import RedirectResponse, Response

from bourse.protocol.api import JobDetail, LogPage
from bourse.server.logs.retention import is_pruned
from bourse.server.routes import jobs as api_jobs
from bourse.server.services import jobs, nodes
from bourse.server.ui import downloads, queries, reasons, views
from bourse.server.ui.guard import Ctx, int_param, member_rank, path_id
from bourse.server.ui.render import json_response, page
from bourse.server.ui.session import check_csrf

LIST_LIMIT = 200
LOG_CHUNKS = 200  # a page of the log feed: at most this many chunks (64 KiB each at most)
LONG_POLL_S = 10.0  # a caught-up log feed waits this long for news before answering
RANK_TABS = 16  # a gang of up to this many members gets a tab per rank, a larger one a menu


@dataclass(frozen=True)
class Section:
    """A part of the job page: its anchor, title and template (``job/_<id>.html``).

    The metrics charts and the proxied ports plug in here as sections of their own."""

    id: str
    title: str

    @property
    def template(self) -> str:
        return f"job/_{self.id}.html"


SECTIONS = (Section("logs", "Logs"), Section("metrics", "Metrics"),
            Section("timeline", "Timeline"), Section("data", "Data"), Section("spec", "Spec"))


@dataclass(frozen=True)
class Filters:
    state: str | None
    text: str

    @classmethod
    def of(cls, ctx: Ctx) -> Filters:
        state = ctx.request.query_params.get("state") or None
        text = ctx.request.query_params.get("q", "").strip()[:200]
        return cls(state if state in views.JOB_STATES else None, text)


async def _rows(ctx: Ctx, filters: Filters) -> list[views.JobRow]:
    async with ctx.state.db.read() as session:
        found = await queries.search_jobs(session, ctx.scope, filters.state, filters.text,
                                          LIST_LIMIT)
        names = await nodes.node_names(session, ctx.scope, (j.node_id for j in found))
    now = ctx.state.clock()
    return [views.job_row(jobs.job_view(j), names, now) for j in found]


async def jobs_page(ctx: Ctx) -> Response:
    filters = Filters.of(ctx)
    return page("jobs.html", **ctx.context(rows=await _rows(ctx, filters), filters=filters,
                                           states=views.JOB_STATES, limit=LIST_LIMIT))


async def jobs_rows(ctx: Ctx) -> Response:
    filters = Filters.of(ctx)
    return page("jobs/_rows.html", **ctx.context(rows=await _rows(ctx, filters), filters=filters))


async def _detail(ctx: Ctx) -> JobDetail:
    async with ctx.state.db.read() as session:
        return await jobs.job_detail(
            session, await jobs.get_job(session, path_id(ctx, "job_id"), ctx.scope), ctx.scope,
            ctx.state.clock())


def _summary(job: JobDetail) -> dict[str, object]:
    """What the page's header shows besides the job itself."""
    current = [a for a in job.attempts if a.number == job.attempt]
    node = (current[0].node_name or current[0].node_id) if current else job.node_id
    waiting = views.waiting_reason(job)
    return {"job": job, "node": node or "", "terminal": job.state.terminal,
            "placement": (current[0].placement or "") if current else "",
            "waiting": waiting, "pending": reasons.parts(waiting)}


def _header(ctx: Ctx, job: JobDetail) -> Response:
    return page("job/_header.html", **ctx.context(**_summary(job)))


@dataclass(frozen=True)
class Owner:
    """What the job page needs of the job's row beyond its view: whose it is, and whether its
    logs moved to the store (for the download links)."""

    project: str
    archived: bool


async def _with_timeline(ctx: Ctx) -> tuple[JobDetail, list[views.Phase], Owner]:
    async with ctx.state.db.read() as session:
        row = await jobs.get_job(session, path_id(ctx, "job_id"), ctx.scope)
        owner = Owner(row.project_id, row.logs_archive is not None
                      and not is_pruned(row.logs_archive))
        job = await jobs.job_detail(session, row, ctx.scope, ctx.state.clock())
        events = await jobs.list_events(session, job.id, ctx.scope, 0)
    return job, views.timeline(events, job.attempts), owner


def _members(job: JobDetail, rank: int | None) -> dict[str, object]:
    """What the log section needs to show a gang's members apart."""
    jobs.check_rank(job.id, job.spec, rank)
    members = job.spec.compute.num_nodes
    return {"members": members, "rank": rank, "rank_tabs": members <= RANK_TABS}


async def job_page(ctx: Ctx) -> Response:
    rank = member_rank(ctx)
    job, phases, owner = await _with_timeline(ctx)
    data = views.data_items(job)
    found = downloads.job_links(ctx, data, owner.project, job, owner.archived)
    return page("job.html", **ctx.context(
        **_summary(job), phases=phases, data=data, links=found.data, log_link=found.log,
        sections=SECTIONS, compute=job.spec.compute.describe(), **_members(job, rank)))


async def job_header(ctx: Ctx) -> Response:
    return _header(ctx, await _detail(ctx))


async def job_timeline(ctx: Ctx) -> Response:
    job, phases, _ = await _with_timeline(ctx)
    return page("job/_timeline.html", **ctx.context(
        job=job, terminal=job.state.terminal, phases=phases))


async def _read_logs(ctx: Ctx, job_id: str, after: int, rank: int | None) -> LogPage:
    async with ctx.state.db.read() as session:
        return await jobs.read_logs(session, job_id, ctx.scope, after, LOG_CHUNKS,
                                    archive=ctx.state.logs, rank=rank)


async def job_logs(ctx: Ctx) -> Response:
    """The API's log page (base64 chunks after a cursor). With ``wait=1`` a caught-up reader is
    answered when something changes or after ``LONG_POLL_S``: live logs without an open
    stream per tab, and without a request a second while nothing happens. ``rank``: one gang
    member's chunks only."""
    job_id = path_id(ctx, "job_id")
    after, rank = int_param(ctx, "after", 0), member_rank(ctx)
    seen = ctx.state.notifier.version
    found = await _read_logs(ctx, job_id, after, rank)
    caught_up = not found.chunks and not found.done
    if (caught_up and ctx.request.query_params.get("wait") == "1"
            and await ctx.state.notifier.wait(seen, LONG_POLL_S)):
        found = await _read_logs(ctx, job_id, found.cursor, rank)
    return json_response({**found.model_dump(mode="json"),
                          "more": len(found.chunks) == LOG_CHUNKS})


async def job_cancel(ctx: Ctx) -> Response:
    await check_csrf(ctx.request, ctx.session)
    job_id = path_id(ctx, "job_id")
    await api_jobs.cancel(job_id, ctx.state, ctx.session.principal)  # as the API does it
    if not ctx.htmx:
        return RedirectResponse(f"/ui/jobs/{job_id}", 303)
    return _header(ctx, await _detail(ctx))
