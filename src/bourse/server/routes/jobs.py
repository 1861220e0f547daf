"""``/api/v1/jobs``: submit, list, show, cancel; timeline; logs (pages and SSE follow, all
members' or one gang member's)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import StreamingResponse

from bourse.core.compute import MAX_NODES
from bourse.core.states import JobState
from bourse.protocol.api import (
    BurstRequest,
    BurstResult,
    EventList,
    JobBatch,
    JobDetail,
    JobList,
    JobView,
    LogPage,
)
from bourse.protocol.common import ID_PATTERN, JobSpec
from bourse.server import openapi
from bourse.server.access import Scope
from bourse.server.audit.middleware import remember
from bourse.server.dataplane.buckets import written
from bourse.server.errors import responses
from bourse.server.routes.deps import Credentials, State, User, bearer, principal_of
from bourse.server.services import burst as burst_service
from bourse.server.services import burst_tokens, jobs, nodes
from bourse.server.services.tokens import Principal
from bourse.server.state import ServerState

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])
MAX_ID = 2**63 - 1  # cursors are 64-bit row ids
JobIdPath = Annotated[str, Path(pattern=ID_PATTERN, max_length=64)]
# a gang member's logs only (``compute.num_nodes`` > 1); checked against the job's members
RankQuery = Annotated[int | None, Query(ge=0, lt=MAX_NODES)]
KEEP_ALIVE_S = 15.0


@router.post("", status_code=201, responses=responses(400, 401, 403, 413, 422, 503))
async def submit(spec: JobSpec, state: State, user: User) -> JobView:
    """Submit a job (422: a field is invalid, or an output's bucket does not exist; 403: it
    names another project's data, or a bucket the exchange's key does not reach)."""
    await _check_buckets(state, [spec], user.project_id)
    job = await state.submit(spec, user.project_id)
    state.scheduler.kick()
    return jobs.job_view(job)


@router.post("/batch", status_code=201, responses=responses(400, 401, 403, 413, 422, 503))
async def submit_batch(batch: JobBatch, state: State, user: User) -> JobList:
    """Submit up to 1,000 jobs at once, in one transaction."""
    await _check_buckets(state, batch.jobs, user.project_id)
    now = state.clock()
    async with state.db.write() as session:
        required = await jobs.required_tags(session, user.project_id)
        # a microsecond apart, so that placement (oldest first) keeps the batch's order
        box = state.secret_box
        created = [await jobs.submit_job(session, spec, user.project_id, now + i * 1e-6,
                                         state.store_root, required=required, box=box)
                   for i, spec in enumerate(batch.jobs)]
    state.scheduler.kick()
    return JobList(jobs=[jobs.job_view(j) for j in created])


async def _check_buckets(state: ServerState, specs: Sequence[JobSpec], project_id: str) -> None:
    """Refuse, before the transaction, jobs writing to a bucket that is not there (a probe of
    the store, outside any transaction: ``dataplane.buckets``)."""
    if state.dataplane is not None:
        await state.dataplane.buckets.check(
            (pair for spec in specs for pair in written(spec)), project_id)


@router.get("", responses=responses(401, 404, 422))
async def list_jobs(state: State, user: User, *, job_state: Annotated[
        JobState | None, Query(alias="state")] = None,
        limit: Annotated[int, Query(ge=1, le=10000)] = 100,
        run: Annotated[str | None, Query(pattern=ID_PATTERN, max_length=64)] = None,
        before: Annotated[str | None, Query(
            pattern=ID_PATTERN, max_length=64,
            description="A job's id: only jobs older than it (the `next` of the page "
                        "before).")] = None) -> JobList:
    """Jobs newest first, a page of ``limit``; ``next`` pages on."""
    async with state.db.read() as session:
        found = await jobs.list_jobs(session, user.scope, job_state.value if job_state else None,
                                     limit + 1, run, before=before)
        views = [jobs.job_view(j) for j in found[:limit]]
        more = views[-1].id if len(found) > limit else None
        return JobList(jobs=await nodes.named(session, user.scope, views), next=more)


@router.get("/{job_id}", responses=responses(401, 404, 422))
async def show(job_id: JobIdPath, state: State, user: User) -> JobDetail:
    async with state.db.read() as session:
        return await jobs.job_detail(session, await jobs.get_job(session, job_id, user.scope),
                                     user.scope, state.clock())


@router.post("/{job_id}/cancel", responses=responses(401, 404, 422))
async def cancel(job_id: JobIdPath, state: State, user: User) -> JobView:
    async with state.db.write() as session:
        job, commands = await jobs.cancel_job(session, job_id, user.scope, state.clock())
    state.hub.send(commands)
    state.notifier.notify()
    return jobs.job_view(job)


async def burster(request: Request, job_id: JobIdPath, state: State,
                  _: Credentials) -> Principal:
    """A user's token, or the job's own burst token (``services.burst_tokens``)."""
    secret = bearer(request) or ""
    if not secret.startswith(burst_tokens.PREFIX):
        return await principal_of(request, "user")
    async with state.db.read() as session:
        principal = await burst_tokens.burster(session, state.key, secret, job_id)
    remember(request.scope, principal)
    return principal


@router.post("/{job_id}/burst", responses=responses(400, 401, 403, 404, 409, 413, 422))
async def burst(job_id: JobIdPath, body: BurstRequest, state: State,
                user: Annotated[Principal, Depends(burster)]) -> BurstResult:
    """Move a running job to another Compute (or off the exchange, ``local``): its attempt
    checkpoints and exits, and the job continues from that checkpoint (409: it is not
    running; 422: it has no checkpoint place, or nothing could ever run that Compute)."""
    async with state.db.write() as session:
        result, commands = await burst_service.burst_job(
            session, job_id, user.scope, body, now=state.clock(), memo=state.scheduler.memo)
    state.hub.send(commands)
    state.notifier.notify()
    return result


@router.get("/{job_id}/events", responses=responses(401, 404, 422))
async def events(job_id: JobIdPath, state: State, user: User, after: Annotated[
        int, Query(ge=0, le=MAX_ID, description=openapi.AFTER_EVENT)] = 0) -> EventList:
    """The job's timeline, oldest first, a page after the cursor ``after``."""
    async with state.db.read() as session:
        return EventList(events=await jobs.list_events(session, job_id, user.scope, after))


@router.get("/{job_id}/logs", responses=responses(401, 404, 422, 503))
async def logs(job_id: JobIdPath, state: State, user: User, *,
               after: Annotated[int, Query(ge=0, le=MAX_ID,
                                           description=openapi.AFTER_CURSOR)] = 0,
               limit: Annotated[int, Query(ge=1, le=10000)] = 1000,
               rank: RankQuery = None) -> LogPage:
    """A page of the job's output chunks after the cursor ``after``; ``done`` once the job has
    ended and no chunk is left."""
    async with state.db.read() as session:
        return await jobs.read_logs(session, job_id, user.scope, after, limit,
                                    archive=state.logs, rank=rank)


@router.get("/{job_id}/logs/follow", responses=responses(401, 404, 422))
async def follow(job_id: JobIdPath, state: State, user: User,
                 after: Annotated[int, Query(ge=0, le=MAX_ID,
                                             description=openapi.AFTER_FOLLOW)] = 0,
                 rank: RankQuery = None) -> StreamingResponse:
    async with state.db.read() as session:  # 404 or a bad rank before the stream starts
        await jobs.get_member(session, job_id, user.scope, rank)
    return StreamingResponse(_follow(state, job_id, user.scope, after, rank),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _sse(event: str, data: str) -> str:
    return f"event: {event}\ndata: {data}\n\n"


async def _follow(state: ServerState, job_id: str, scope: Scope, cursor: int,
                  rank: int | None) -> AsyncIterator[str]:
    """Chunks as they arrive, the job whenever its state (or its progress line) changes,
    then ``end``; or ``stopping`` and no ``end`` when the coordinator is asked to stop (the
    client reconnects from its cursor: the job is not over)."""
    last_state: tuple[str, str | None] | None = None
    while not state.notifier.closed:
        seen = state.notifier.version
        async with state.db.read() as session:
            page = await jobs.read_logs(session, job_id, scope, cursor, 500, archive=state.logs,
                                        rank=rank)
            job = jobs.job_view(await jobs.get_job(session, job_id, scope))
        for chunk in page.chunks:
            yield _sse("chunk", chunk.model_dump_json())
        cursor = page.cursor
        if (job.state, job.progress) != last_state:
            yield _sse("job", job.model_dump_json())
            last_state = (job.state, job.progress)
        if page.done:
            yield _sse("end", job.model_dump_json())
            return
        if not page.chunks and not await state.notifier.wait(seen, KEEP_ALIVE_S):
            yield ": keep-alive\n\n"
    yield _sse("stopping", json.dumps({"reason": "the coordinator is stopping"}))
