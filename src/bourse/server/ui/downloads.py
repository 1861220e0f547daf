"""Downloads from the job page and a tracked run's page: the job page's links (`job_links`,
made at render time; a run's are ``ui.artifacts``') and the route that serves them all
(`download`), streaming from the exchange's store (``ui.links`` says what a link is and why it
is safe).

A link to one object downloads it as an attachment; a link to a prefix (an output directory,
the checkpoints, the kept ``lightning_logs/``) answers a page listing the objects below it,
each with a link of its own; the archived log downloads as plain text; a run's artifact
downloads from ``tracking/<project>/<run>/`` once the run is found in the link's project.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.responses import Response, StreamingResponse

from bourse.core.errors import NotFound
from bourse.core.uri import StoreURI, parse_uri
from bourse.protocol.api import JobView
from bourse.server.access import Scope
from bourse.server.dataplane.summary import plane_of
from bourse.server.db.schema import TrackingRun
from bourse.server.logs.archive import as_text
from bourse.server.logs.retention import is_pruned
from bourse.server.services import claims, jobs
from bourse.server.services import tracking_artifacts as ta
from bourse.server.ui import links
from bourse.server.ui.guard import Ctx
from bourse.server.ui.links import Grant, Kind
from bourse.server.ui.render import page
from bourse.server.ui.views import DataItem
from bourse.storage.listing import locate
from bourse.storage.store import ObjectInfo, ObjectStore

LISTED = 1000  # a prefix's page lists its first this many objects
LOG_CHUNKS = 10_000_000  # the whole log: an archive is read whole anyway
CHUNK = 1 << 20  # bytes per piece of a streamed object
LINKED_ROLES = ("output", "checkpoint")


@dataclass(frozen=True)
class JobLinks:
    """The job page's links: store URI -> link, and the archived log's (if archived)."""

    data: dict[str, str]
    log: str | None


def signing_key(ctx: Ctx) -> bytes:
    return links.signing_key(ctx.state.key)


def job_links(ctx: Ctx, items: list[DataItem], project: str, job: JobView,
              archived: bool) -> JobLinks:
    """Links to what the job wrote (outputs once uploaded, the checkpoint prefix) and to its
    archived log, for the job's project; none without a store."""
    if ctx.state.dataplane is None:
        return JobLinks({}, None)
    key, now = signing_key(ctx), ctx.state.clock()
    data = {i.uri: links.url(key, links.grant(Kind.OBJECT, i.uri, project, now))
            for i in items if i.role in LINKED_ROLES and i.stored is not False}
    log = links.url(key, links.grant(Kind.LOG, job.id, project, now)) if archived else None
    return JobLinks(data, log)


async def download(ctx: Ctx) -> Response:
    """``/ui/download/<token>``: 403 for a forged or expired link, 404 for one of a project the
    session does not see or for data that project may not read (any more)."""
    grant = links.verify(signing_key(ctx), str(ctx.request.path_params["token"]),
                         ctx.state.clock())
    if not ctx.scope.sees(grant.project):
        raise NotFound("no such download", hint="sign in as a member of the job's project")
    if grant.kind is Kind.LOG:
        return await _log(ctx, grant)
    if grant.kind is Kind.ARTIFACT:
        return await _artifact(ctx, grant)
    return await _data(ctx, grant)


async def _data(ctx: Ctx, grant: Grant) -> Response:
    plane = plane_of(ctx.state.dataplane)
    uri = parse_uri(grant.target, field="uri")
    async with ctx.state.db.read() as session:
        await claims.check_visible(session, uri, grant.project, plane.root)
    store = plane.store_for(uri)
    found = await locate(store, uri)
    if found.single:
        return _attachment(store, found.objects[0])
    return _listing(ctx, grant, uri, found.objects)


def _attachment(store: ObjectStore, info: ObjectInfo,
                media_type: str = "application/octet-stream") -> Response:
    return StreamingResponse(
        _pieces(store, info), media_type=media_type,
        headers={"Content-Disposition": links.attachment(links.safe_filename(info.key)),
                 "Content-Length": str(info.size)})


async def _pieces(store: ObjectStore, info: ObjectInfo) -> AsyncIterator[bytes]:
    async for piece in store.stream_range(info.key, 0, info.size, CHUNK):
        yield bytes(piece)


def _listing(ctx: Ctx, grant: Grant, uri: StoreURI,
             objects: tuple[ObjectInfo, ...]) -> Response:
    """A prefix's objects, each linked for the same project (checked again when followed)."""
    key, now = signing_key(ctx), ctx.state.clock()
    rows = [(info, links.url(key, links.grant(
        Kind.OBJECT, str(StoreURI(uri.scheme, uri.bucket, info.key)), grant.project, now)))
            for info in objects[:LISTED]]
    return page("download.html", **ctx.context(uri=str(uri), rows=rows, total=len(objects),
                                               size=sum(i.size for i in objects)))


async def _artifact(ctx: Ctx, grant: Grant) -> Response:
    """A run's artifact: the run must still be the link's project's (a run id of another
    project answers as a missing one does)."""
    run_id, relative = links.artifact_of(grant.target)
    async with ctx.state.db.read() as session:
        run = await session.get(TrackingRun, run_id)
        if run is None or run.project_id != grant.project:
            raise NotFound("no such download", hint="sign in as a member of the run's project")
    store, info = await ta.head(ctx.state.dataplane, grant.project, ta.Place(run_id, relative))
    return _attachment(store, info, links.media_type(links.safe_filename(info.key)))


async def _log(ctx: Ctx, grant: Grant) -> Response:
    async with ctx.state.db.read() as session:
        job = await jobs.get_job(session, grant.target, Scope(grant.project))
        if job.logs_archive is None or is_pruned(job.logs_archive):
            raise NotFound(f"the logs of {job.id} are not archived",
                           hint="read them on the job page, or with `bourse logs`")
        found = await jobs.read_logs(session, job.id, Scope(grant.project), 0, LOG_CHUNKS,
                                     archive=ctx.state.logs)
    name = links.safe_filename(f"{job.id}.log")
    return Response(as_text(found.chunks), media_type="text/plain; charset=utf-8",
                    headers={"Content-Disposition": links.attachment(name)})
