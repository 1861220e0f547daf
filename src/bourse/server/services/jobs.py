"""Jobs: submit, read, cancel; their timeline and logs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.cost import (
    attempt_cost,
    billed_seconds,
    on_demand_cost,
    on_demand_rate,
    total_cost,
)
from bourse.core.errors import Conflict, InvalidInput, NotFound
from bourse.core.placement import shape_of
from bourse.core.states import ATTEMPT_ACTIVE, AttemptState, JobState
from bourse.core.uri import StoreURI
from bourse.protocol.api import (
    AttemptView,
    EventView,
    JobDetail,
    JobView,
    LogChunkView,
    LogPage,
)
from bourse.protocol.common import JobSpec
from bourse.server.access import Scope
from bourse.server.commands import Command
from bourse.server.dataplane.plan import resolve_spec
from bourse.server.db.schema import (
    Attempt,
    BundleOwner,
    Event,
    Job,
    LogChunk,
    Node,
    Project,
    Run,
)
from bourse.server.ids import new_id
from bourse.server.logs.archive import LogArchive, merge, view
from bourse.server.logs.retention import is_pruned
from bourse.server.services import claims, gangs, secrets
from bourse.server.services.lifecycle import add_event, set_job_state
from bourse.server.services.specs import remember, spec_of
from bourse.storage.errors import StoreUnavailable

CANCEL_GRACE_S = 10.0


async def submit_job(session: AsyncSession, spec: JobSpec, project_id: str, now: float,
                     store: StoreURI | None = None, *, required: Sequence[str] | None = None,
                     box: secrets.SecretBox | None = None) -> Job:
    """Accept a job into a project. ``store`` is the root of the exchange's bucket, None
    without a data plane (then a job that names data is refused). ``required``: the
    project's compliance tags when the caller has read them already (a batch reads them
    once). What the job reads and writes in the store is checked against, and claimed for,
    its project (``services.claims``). The values of env variables the spec marks secret
    are sealed with ``box`` (required then) and stored redacted. Every refusal
    (``BourseError``) is raised before anything is written: a group of submits
    (``server.submitter``) relies on that to accept the rest of the group in the same
    transaction."""
    if spec.bundle and await session.get(BundleOwner, (spec.bundle, project_id)) is None:
        raise InvalidInput(f"code bundle {spec.bundle[:12]}… has not been uploaded",
                           field="bundle", hint="upload it first with PUT /api/v1/bundles/{sha}")
    await secrets.check_names(session, project_id, spec.project_secrets)
    if spec.run is not None:
        await _run_open(session, spec.run, project_id)
    if required is None:
        required = await required_tags(session, project_id)
    spec = with_tags(spec, required)
    job_id = new_id("j")
    spec = resolve_spec(spec, job_id, store)
    await claims.claim_spec(session, spec, job_id, project_id, store, now=now)
    assert box is not None or not spec.secrets, "a spec with secret env values needs a box"
    spec, sealed = secrets.seal_spec(box, job_id, spec) if box else (spec, None)
    stored = spec.model_dump(mode="json")
    job = Job(id=job_id, name=spec.name, state=JobState.PENDING.value, spec=stored,
              created_at=now, updated_at=now, attempt=0, cancel_requested=False,
              retries_used=0, max_retries=spec.max_retries, avoid_nodes=[], run=spec.run,
              project_id=project_id, shape=shape_of(stored["compute"]),
              pending_until=pending_until(spec, now), sealed_env=sealed)
    session.add(job)
    remember(job_id, spec)
    add_event(session, job.id, 0, "state", now, state=JobState.PENDING.value,
              message="submitted")
    return job


def pending_until(spec: JobSpec, since: float) -> float | None:
    """When a job that starts waiting at ``since`` stops waiting (its pending timeout)."""
    timeout = spec.pending_timeout_s
    return None if timeout is None else since + timeout


async def _run_open(session: AsyncSession, run_id: str, project_id: str) -> None:
    """Refuse a job for an app run that was cancelled (``services.runs``)."""
    cancelled = await session.scalar(select(Run.cancelled).where(
        Run.project_id == project_id, Run.id == run_id))
    if cancelled is not None:
        raise Conflict(f"run {run_id} was cancelled: {cancelled}",
                       hint="run the app again for a new run")


async def required_tags(session: AsyncSession, project_id: str) -> list[str]:
    """The compliance tags a project requires of the nodes its jobs run on."""
    return list(await session.scalar(select(Project.required_tags).where(
        Project.id == project_id)) or [])


def with_tags(spec: JobSpec, required: Sequence[str]) -> JobSpec:
    """The spec with its project's compliance tags added to its compute: the matcher then
    places it only on nodes carrying them."""
    missing = [t for t in required if t not in spec.compute.tags]
    if not missing:
        return spec
    compute = spec.compute.model_copy(update={"tags": (*spec.compute.tags, *missing)})
    return spec.model_copy(update={"compute": compute})


async def get_job(session: AsyncSession, job_id: str, scope: Scope) -> Job:
    """The job, if the scope sees it; another project's job is as missing as no job."""
    job = await session.get(Job, job_id)
    if job is None or not scope.sees(job.project_id):
        raise NotFound(f"no job {job_id!r}", hint="`bourse jobs` lists jobs")
    return job


async def list_jobs(session: AsyncSession, scope: Scope, state: str | None, limit: int,
                    run: str | None = None, *, before: str | None = None) -> Sequence[Job]:
    """Jobs newest first (by creation, then id), ``limit`` of them; with ``before`` (a job
    the scope sees: the last of the page before), only those older than it. Every page is
    one index range, however deep (``ix_jobs_created``, ``ix_jobs_project_created``)."""
    query = scope.filter(select(Job), Job.project_id).order_by(
        Job.created_at.desc(), Job.id.desc()).limit(limit)
    if state is not None:
        query = query.where(Job.state == state)
    if run is not None:
        query = query.where(Job.run == run)
    if before is not None:
        mark = await _cursor(session, scope, before)
        query = query.where(tuple_(Job.created_at, Job.id) < tuple_(*mark))
    return (await session.scalars(query)).all()


async def _cursor(session: AsyncSession, scope: Scope, job_id: str) -> tuple[float, str]:
    found = (await session.execute(select(Job.created_at, Job.project_id).where(
        Job.id == job_id))).first()
    if found is None or not scope.sees(found.project_id):
        raise NotFound(f"before={job_id}: no such job to page from",
                       hint="pass the id of the last job of the page before (its `next`)")
    return found.created_at, job_id


async def cancel_job(session: AsyncSession, job_id: str, scope: Scope,
                     now: float, why: str | None = None) -> tuple[Job, list[Command]]:
    """Cancel a job: at once when it is not placed, else by asking its node to stop it.
    ``why``: what cancelled it, when not its owner (its app run ending)."""
    job = await get_job(session, job_id, scope)
    return job, cancel_row(session, job, now, why)


def cancel_row(session: AsyncSession, job: Job, now: float,
               why: str | None = None) -> list[Command]:
    state = JobState(job.state)
    if state.terminal or job.cancel_requested:
        return []
    if state is JobState.PENDING:
        job.reason = why or "cancelled before it was placed"
        set_job_state(session, job, JobState.CANCELLED, now, job.reason)
        return []
    job.cancel_requested = True
    job.updated_at = now
    add_event(session, job.id, job.attempt, "cancel", now, message=why or "cancel requested")
    return gangs.cancel_commands(job, CANCEL_GRACE_S, why or "cancelled")


def stalled_in(job: Job) -> dict[str, Any] | None:
    """The job's stall evidence (``services.metrics``) when it is about its current attempt
    and the job still runs."""
    found = job.stalled
    if not found or job.state != JobState.RUNNING.value or found.get("attempt") != job.attempt:
        return None
    return found


def job_view(job: Job) -> JobView:
    return JobView(id=job.id, name=job.name, state=job.state,
                   spec=spec_of(job).redacted(), created_at=job.created_at,
                   updated_at=job.updated_at, attempt=job.attempt, node_id=job.node_id,
                   exit_code=job.exit_code, reason=job.reason,
                   pending_reason=job.pending_reason, cancel_requested=job.cancel_requested,
                   outputs=job.outputs, progress=job.progress, cost=job.cost,
                   resume=bool(job.resume), stalled=stalled_in(job))


async def job_detail(session: AsyncSession, job: Job, scope: Scope, now: float) -> JobDetail:
    """A job with its attempts, each priced; the job's cost includes a running attempt's. The
    names of nodes are shown only to their own project."""
    attempts = (await session.scalars(
        select(Attempt).where(Attempt.job_id == job.id).order_by(Attempt.number,
                                                                 Attempt.rank))).all()
    names = {n.id: n.name for n in (await session.scalars(scope.filter(
        select(Node).where(Node.id.in_({a.node_id for a in attempts})), Node.project_id))).all()}
    views = [attempt_view(a, names.get(a.node_id), now) for a in attempts]
    view = job_view(job).model_dump()
    view["node_name"] = names.get(job.node_id or "")
    view["cost"] = total_cost([a.cost for a in views])
    lost = [a.lost_work_s for a in views if a.lost_work_s is not None]
    view["lost_work_s"] = sum(lost) if lost else None
    view["on_demand_cost"] = total_cost([a.on_demand_cost for a in views])
    return JobDetail(**view, attempts=views)


def attempt_view(a: Attempt, node_name: str | None, now: float) -> AttemptView:
    """An attempt with what it cost, and what its useful work costs on demand."""
    billed = billed_seconds(a.started_at, a.ended_at, now)
    listed = on_demand_rate(a.price, a.list_price, a.spot)
    return AttemptView(
        number=a.number, rank=a.rank, node_id=a.node_id, node_name=node_name, state=a.state,
        placed_at=a.placed_at, started_at=a.started_at, ended_at=a.ended_at,
        exit_code=a.exit_code, reason=a.reason, placement=a.placement, price_per_hour=a.price,
        cost=attempt_cost(a.price, a.started_at, a.ended_at, now),
        list_price_per_hour=listed, spot=a.spot, preempted_at=a.preempt_at,
        checkpoint_at=a.checkpoint_at, lost_work_s=a.lost_work_s,
        on_demand_cost=on_demand_cost(listed, billed, a.lost_work_s))


async def list_events(session: AsyncSession, job_id: str, scope: Scope, after: int,
                      limit: int = 1000) -> list[EventView]:
    await get_job(session, job_id, scope)
    rows = (await session.scalars(
        select(Event).where(Event.job_id == job_id, Event.id > after)
        .order_by(Event.id).limit(limit))).all()
    return [EventView(id=e.id, job_id=e.job_id, attempt=e.attempt, time=e.time, kind=e.kind,
                      state=e.state, message=e.message, data=e.data) for e in rows]


def check_rank(job_id: str, spec: JobSpec, rank: int | None) -> None:
    """Refuse a member rank the job does not have (ranks run from 0 to num_nodes - 1)."""
    members = spec.compute.num_nodes
    if rank is None or 0 <= rank < members:
        return
    if members == 1:
        raise InvalidInput(f"rank {rank} is not a member of job {job_id}: it runs on one node "
                           "(rank 0)", field="rank", hint="leave out the rank, or pass 0")
    raise InvalidInput(f"rank {rank} is not a member of job {job_id}: its {members} members "
                       f"are ranks 0 to {members - 1}", field="rank",
                       hint=f"pass a rank from 0 to {members - 1}, or none for every member")


async def get_member(session: AsyncSession, job_id: str, scope: Scope,
                     rank: int | None) -> Job:
    """The job, once ``rank`` (when given) is known to be one of its members."""
    job = await get_job(session, job_id, scope)
    check_rank(job.id, spec_of(job), rank)
    return job


async def read_logs(session: AsyncSession, job_id: str, scope: Scope, after: int, limit: int, *,
                    archive: LogArchive | None = None, rank: int | None = None) -> LogPage:
    """Chunks after the cursor in arrival order (sequence order within each attempt and
    member); only gang member ``rank``'s when given.

    ``done`` means the job has ended and every chunk of its final attempt has been returned
    (it reports its end only after its last chunk). An earlier attempt that was declared lost
    while still running may deliver more when its node reconnects; those chunks are kept,
    labelled with their attempt, and appear after the cursor. An ended job's logs may have
    moved to the store (``archive``): they are read from there, merged with any rows left.
    """
    job = await get_member(session, job_id, scope, rank)
    ended = JobState(job.state).terminal  # read before the chunks: see above
    # one member's page skips the others' chunks: read up to the newest row of any member
    # first, so that the cursor can move past them all without missing a row stored meanwhile
    newest = None if rank is None else await session.scalar(
        select(func.max(LogChunk.id)).where(LogChunk.job_id == job_id))
    chunks = await _log_rows(session, job_id, after, limit, rank=rank, newest=newest)
    archived: Sequence[LogChunkView] = ()
    if is_pruned(job.logs_archive):
        return LogPage(chunks=[], cursor=after, done=ended, pruned=True)
    if job.logs_archive is not None:
        if archive is None:
            raise StoreUnavailable(f"the logs of {job_id} are archived in the store, and this "
                                   "coordinator has no store", hint="start it with its store")
        archived = await archive.read(job.logs_archive)
        chunks = merge(archived, chunks, after, limit, rank)
    cursor = chunks[-1].cursor if chunks else after
    if rank is not None and len(chunks) < limit:  # every chunk up to the newest was seen
        cursor = max(cursor, newest or 0, *(c.cursor for c in archived[-1:]))
    return LogPage(chunks=chunks, cursor=cursor, done=ended and len(chunks) < limit)


async def _log_rows(session: AsyncSession, job_id: str, after: int, limit: int, *,
                    rank: int | None, newest: int | None) -> list[LogChunkView]:
    query = select(LogChunk).where(LogChunk.job_id == job_id, LogChunk.id > after)
    if rank is not None:
        query = query.where(LogChunk.rank == rank, LogChunk.id <= (newest or 0))
    return [view(c) for c in (await session.scalars(
        query.order_by(LogChunk.id).limit(limit))).all()]


def active_attempt_states() -> list[AttemptState]:
    return sorted(ATTEMPT_ACTIVE)


async def active_attempts(session: AsyncSession) -> list[tuple[str, int, JobSpec]]:
    """(job id, attempt, spec) of every attempt placed and not ended."""
    rows = await session.execute(select(Attempt.job_id, Attempt.number, Job.spec).join(
        Job, Job.id == Attempt.job_id).where(Attempt.state.in_(active_attempt_states())))
    return [(job_id, number, JobSpec.model_validate(spec)) for job_id, number, spec in rows]
