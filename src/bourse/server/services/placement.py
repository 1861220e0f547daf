"""Placement, the shell: read pending jobs and nodes, ask the plan (``core.placement``), write it.

A pass reads what pending jobs there are by (project, shape) in one statement; a shape that no
free offer fits is skipped whole, so jobs that cannot run never hold up those that can,
however long the queue. Jobs of the shapes that fit are read a page per project, oldest first,
and claimed with row locks (``SKIP LOCKED`` on PostgreSQL) so several coordinators can share
one database. A job that no known node could ever run — none connected or enrolled has what it
asks, and no offer can be launched — fails at once, saying why; one that waits says why, and
``pending_timeout_s`` ends the wait. A placement is a lease (``services.liveness``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, and_, bindparam, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core import blocklist
from bourse.core.blocklist import Block
from bourse.core.compute import Compute
from bourse.core.constraints import first_lack
from bourse.core.constraints import share as share_of
from bourse.core.match import cross_region
from bourse.core.offer import Offer
from bourse.core.placement import (
    Candidate,
    Placement,
    Plan,
    Room,
    by_job,
    fits_any,
    plan,
    shape_of,
)
from bourse.core.states import AttemptState, JobState
from bourse.server.commands import Command
from bourse.server.db.schema import Attempt, Job
from bourse.server.services import claims, gangs, waiting
from bourse.server.services.capacity import Memo, live_capacity
from bourse.server.services.jobs import active_attempt_states
from bourse.server.services.lifecycle import set_job_state
from bourse.server.services.specs import spec_of
from bourse.server.services.starts import start_command

PAGE = 16


@dataclass
class PlacementReport:
    placed: int = 0
    unplaced: int = 0  # jobs looked at and left waiting
    failed: int = 0  # jobs that can never run, or waited past their pending timeout
    more: bool = False  # a pass stopped at its limit: pending jobs may fit what is left
    lost_nodes: list[str] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)


# --- pending jobs ------------------------------------------------------------------------------

_DUE = or_(Job.not_before.is_(None), Job.not_before <= bindparam("now"))
# an index-only scan of ix_jobs_pending: what waits, by project and shape (due or not)
_GROUPS = (select(Job.project_id, Job.shape, func.count())
           .where(Job.state == JobState.PENDING.value).group_by(Job.project_id, Job.shape))


def _candidates(after_cursor: bool) -> Select[Any]:
    """One project's due jobs of one shape, oldest first: equalities on ix_jobs_pending, so
    the rows come in order and the limit stops the scan."""
    query = select(Job).where(
        Job.state == JobState.PENDING.value, Job.project_id == bindparam("project"),
        Job.shape == bindparam("of_shape"), _DUE)
    if after_cursor:
        query = query.where(or_(Job.created_at > bindparam("created_at"), and_(
            Job.created_at == bindparam("created_at"), Job.id > bindparam("id"))))
    return (query.order_by(Job.created_at, Job.id).limit(bindparam("size"))
            .with_for_update(skip_locked=True))


_CANDIDATES = {after: _candidates(after) for after in (False, True)}
_COMPUTES: dict[str, Compute] = {}  # a shape's Compute (equal shapes, equal Computes)


@dataclass
class Group:
    """Pending jobs of one project and shape."""

    project: str
    shape: str
    count: int


async def pending_groups(session: AsyncSession) -> list[Group]:
    rows = (await session.execute(_GROUPS)).all()
    if any(shape is None for _, shape, _ in rows):  # written before shapes existed
        await _fill_shapes(session)
        rows = (await session.execute(_GROUPS)).all()
    return [Group(project, shape or "", count) for project, shape, count in rows]


async def _fill_shapes(session: AsyncSession) -> None:
    jobs = (await session.scalars(select(Job).where(
        Job.state == JobState.PENDING.value, Job.shape.is_(None)))).all()
    for job in jobs:
        job.shape = shape_of(job.spec.get("compute") or {})
    await session.flush()


async def computes_of(session: AsyncSession, shapes: Iterable[str]) -> dict[str, Compute]:
    """Each shape's Compute, read from one job of the shape the first time it is seen."""
    for shape in set(shapes) - _COMPUTES.keys():
        job = await session.scalar(select(Job).where(Job.shape == shape).limit(1))
        if job is not None:
            if len(_COMPUTES) > 10_000:
                _COMPUTES.clear()
            _COMPUTES[shape] = spec_of(job).compute
    return {shape: _COMPUTES[shape] for shape in shapes if shape in _COMPUTES}


def candidate(job: Job, data_region: str | None) -> Candidate:
    spec = spec_of(job)
    return Candidate(job.id, job.project_id, job.created_at, spec.compute, job.shape or "",
                     tuple(_blocklist(job)), data_region if spec.inputs else None)


def _blocklist(job: Job) -> list[Block]:
    """The job's blocklist; nodes that lost it before blocklists existed never expire."""
    legacy = [Block("node", node, float("inf")) for node in job.avoid_nodes if not job.blocklist]
    return [*blocklist.read(job.blocklist), *legacy]


# --- the pass ----------------------------------------------------------------------------------

@dataclass
class Pass:
    """One placement pass's settings and what it found."""

    session: AsyncSession
    now: float
    lease_s: float
    limit: int
    data_region: str | None
    report: PlacementReport = field(default_factory=PlacementReport)
    unfit: set[str] = field(default_factory=set)  # shapes no free offer fits
    rooms: list[Room] = field(default_factory=list)
    memo: Memo = field(default_factory=Memo)
    full: bool = False  # the periodic pass
    jobs: dict[str, Job] = field(default_factory=dict)  # rows read (the identity map is weak)
    shapes: set[str] = field(default_factory=set)  # of the pending jobs


async def place_pending(session: AsyncSession, now: float, lease_s: float, *,
                        batch: int = 200, allow_unverified: bool = False,
                        data_region: str | None = None, full: bool = True,
                        memo: Memo | None = None) -> PlacementReport:
    """Place pending jobs on free room, at most ``batch``. ``full`` (the periodic tick) also
    tells every waiting job why it waits and ends the waits past their timeout.
    ``data_region``: where the exchange's store is: jobs with inputs prefer nodes there.
    ``memo``: what the passes over this database keep (the scheduler's; default: none)."""
    run = Pass(session, now, lease_s, batch, data_region, memo=memo or Memo(), full=full)
    if full:
        run.report.failed += await waiting.end_timed_out(session, now)
    # a quick pass first takes the groups the last pass read (the common case: a freed slot,
    # the same jobs waiting), and reads them again only if room is left that they did not use
    cached = not full and bool(run.memo.groups)
    # nothing waited at the last pass: only a job submitted since could use room, and reading
    # what waits (an index-only scan) is cheaper than reading the room; a pass with nothing
    # pending reads no node
    groups = run.memo.groups if cached and run.memo.groups else await pending_groups(session)
    run.memo.groups = groups
    if not groups:
        return run.report
    run.rooms = await live_capacity(session, allow_unverified)
    computes = await _pass(run, groups)
    if cached and run.report.placed < batch and any(r.offers() for r in run.rooms):
        fresh = await pending_groups(session)  # a new shape, or a job back from a retry
        run.memo.groups = fresh
        if {(g.project, g.shape) for g in fresh} - {(g.project, g.shape) for g in groups}:
            computes = await _pass(run, fresh)
    if full:
        await waiting.say_why(run, computes)
    return run.report


async def _pass(run: Pass, groups: Sequence[Group]) -> dict[str, Compute]:
    """Place what fits of ``groups`` on the pass's rooms; returns the groups' Computes."""
    failed_before = run.report.failed
    placed_before = run.report.placed
    computes = await computes_of(run.session, {g.shape for g in groups})
    run.shapes = set(computes)
    environments = [o for room in run.rooms for o in room.offers()]  # before any is taken
    run.unfit = {s for s, c in computes.items() if not fits_any(c, run.rooms)}
    await waiting.fail_never_runnable(run, groups, computes)
    await _place_fitting(run, groups, environments)
    run.report.unplaced = max(0, sum(g.count for g in groups)
                              - (run.report.placed - placed_before)
                              - (run.report.failed - failed_before))
    return computes


async def _place_fitting(run: Pass, groups: Sequence[Group],
                         environments: Sequence[Offer]) -> None:
    """Jobs of the shapes that fit, a page per project at a time, until the room or the
    limit is used up."""
    waiting = {g.project: 0 for g in groups}
    for g in groups:
        if g.shape not in run.unfit:
            waiting[g.project] += g.count
    cursors: dict[str, tuple[float, str] | None] = {p: None for p, n in waiting.items() if n}
    active = await _active_by_project(run.session) if len(cursors) > 1 else {}
    rooms = run.rooms
    size = first_page([o for room in rooms for o in room.offers()])
    while cursors and run.report.placed < run.limit:
        queues = await _load(run, cursors, size)
        if not queues:
            return
        found = plan(queues, rooms, now=run.now, active=active,
                     limit=run.limit - run.report.placed)
        await _apply(run, found, environments)
        for placement in found.placements:
            active[placement.job.project] = active.get(placement.job.project, 0) + 1
        run.unfit |= found.unfit
        if not any(room.offers() for room in rooms):
            return
        cursors = {p: (q[-1].created_at, q[-1].id) for p, q in queues.items()
                   if p in found.exhausted and len(q) == size}
        size = PAGE
    run.report.more = run.report.placed >= run.limit


async def _load(run: Pass, cursors: dict[str, tuple[float, str] | None],
                size: int) -> dict[str, list[Candidate]]:
    """The next page of each project's due jobs of shapes that still fit, oldest first."""
    fit = sorted(s for s in run.shapes if s not in run.unfit)
    queues: dict[str, list[Candidate]] = {}
    for project, cursor in cursors.items():
        params: dict[str, Any] = {"now": run.now, "project": project, "size": size}
        if cursor is not None:
            params |= {"created_at": cursor[0], "id": cursor[1]}
        found: list[Job] = []
        for shape in fit:
            found += (await run.session.scalars(_CANDIDATES[cursor is not None],
                                                params | {"of_shape": shape})).all()
        found = sorted(found, key=lambda j: (j.created_at, j.id))[:size]
        run.jobs |= {job.id: job for job in found}
        if found:
            queues[project] = [candidate(job, run.data_region) for job in found]
    return queues


async def _apply(run: Pass, found: Plan, environments: Sequence[Offer]) -> None:
    for members in by_job(found.placements):
        job = run.jobs[members[0].job.id]
        # looked up only for a job about to get credentials, not at every pass it waits
        if spec_of(job).inputs and await _inputs_taken(run.session, job, run.now):
            run.report.failed += 1
            continue
        run.report.commands.append(_place(run, job, members, environments))
        run.report.placed += 1


async def _active_by_project(session: AsyncSession) -> dict[str, int]:
    rows = await session.execute(
        select(Job.project_id, func.count()).join(Attempt, Attempt.job_id == Job.id)
        .where(Attempt.state.in_(active_attempt_states())).group_by(Job.project_id))
    return {project: int(count) for project, count in rows.all()}


def first_page(offers: Sequence[Offer]) -> int:
    """How many pending jobs a pass reads first: no more than the free CPUs can take (a job
    reserves one unless it asks for a fraction), so that the pass a freed slot causes loads
    one or two jobs, not a whole page; later pages are full."""
    cpus = {o.node_id or i: o.cpus or 0.0 for i, o in enumerate(offers)}  # a node's offers
    # share its CPUs
    return min(PAGE, max(1, math.ceil(sum(cpus.values()) - 1e-9)))


async def _inputs_taken(session: AsyncSession, job: Job, now: float) -> bool:
    """Fail a job whose inputs another project has claimed since it was submitted: the
    attempt would get credentials for that project's data (``services.claims``)."""
    reason = await claims.taken_input(session, spec_of(job), job.project_id)
    if reason is None:
        return False
    job.reason = reason
    set_job_state(session, job, JobState.FAILED, now, reason)
    return True


def _place(run: Pass, job: Job, members: Sequence[Placement],
           environments: Sequence[Offer]) -> Command:
    """The attempt's rows (one per member of a gang) and the start of its rank 0."""
    job.attempt += 1
    job.node_id, job.pending_reason = members[0].node.id, None
    attempts = [_attempt(run, job, m, environments) for m in members]
    if len(members) == 1:
        set_job_state(run.session, job, JobState.SCHEDULED, run.now,
                      f"placed on {attempts[0].placement}")
        return start_command(job, attempts[0])
    return gangs.placed(run.session, job, attempts, run.now)


def _attempt(run: Pass, job: Job, placement: Placement,
             environments: Sequence[Offer]) -> Attempt:
    compute, chosen, node = spec_of(job).compute, placement.match, placement.node
    kind = "spot" if chosen.spot else "on-demand"
    text = (f"{node.name}: cheapest fit at ${chosen.price:.4f}/h ({kind}) for "
            f"{compute.describe()}")
    if cross_region(chosen.offer, placement.job.near):
        text += (f"; cross-region: the data is in {placement.job.near}, the node in "
                 f"{chosen.offer.region}")
    skipped = skipped_for_environment(compute, environments)
    if skipped:
        text += f" (skipped {'; '.join(skipped)})"
    attempt = Attempt(job_id=job.id, number=job.attempt, rank=placement.rank, node_id=node.id,
                      state=AttemptState.SCHEDULED.value, placed_at=run.now,
                      start_deadline=run.now + run.lease_s, placement=text,
                      resources=placement.need.resources(), price=chosen.price,
                      list_price=node.on_demand * share_of(compute, chosen.offer),
                      spot=chosen.spot, address=node.address,
                      provider=chosen.offer.provider, region=chosen.offer.region)
    run.session.add(attempt)
    return attempt


ENVIRONMENT_CONSTRAINTS = frozenset({"environment", "image"})


def skipped_for_environment(compute: Compute, offers: Sequence[Offer],
                            most: int = 3) -> list[str]:
    """Nodes that could not run the job's torch/CUDA build or image, with why (only for jobs
    that name one: the common job pays nothing)."""
    if compute.torch is None and compute.cuda is None and compute.image is None:
        return []
    found = []
    for offer in offers:
        lack = first_lack(compute, offer)
        if lack is not None and lack[0] in ENVIRONMENT_CONSTRAINTS:
            found.append(f"{offer.instance_type}: {lack[1]}")
    return found[:most]
