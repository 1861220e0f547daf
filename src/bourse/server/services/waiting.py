"""Placement's word to the jobs it leaves waiting: why each shape waits (one statement per
shape, written only where it changed), the jobs that no known node and no cloud could ever run
(failed at once, saying why), and the waits past their pending timeout."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.compute import Compute
from bourse.core.placement import Room, fits_any, member_fits, why_waiting
from bourse.core.states import JobState
from bourse.server.db.schema import Job
from bourse.server.services.launches import in_flight_job_ids
from bourse.server.services.lifecycle import set_job_state
from bourse.server.services.specs import spec_of

if TYPE_CHECKING:
    from bourse.server.services.placement import Group, Pass


NO_NODE_YET = ("no node has joined this exchange yet (start one: `bourse agent --server URL "
               "--token TOKEN`, or `bourse up`)")
NOT_CONNECTED = "no verified node is connected"
ALL_BUSY = "every connected node is busy"
BUSY = "waiting for room: the nodes that can run it are busy or away"
NONE_CONNECTED_CAN = "no connected node can run it now"
TURN = ("waiting its turn: the free room that fits it went to older jobs (oldest first within "
        "a project; the project with the fewest running jobs first between projects)")
NEVER = ("no node on this exchange can ever run it: none of the {nodes} known node(s) has "
         "what it asks, and no cloud offer can be launched")


async def fail_never_runnable(run: Pass, groups: Sequence[Group],
                               computes: dict[str, Compute]) -> None:
    """Fail, at once, first attempts of shapes that no known node could ever take (a retry
    waits: its job ran once, so its node existed; a gang waits when some node could take a
    member: more may join its network). An exchange no node has joined yet is not
    judged: its jobs wait, saying so. A quick pass judges only shapes not found runnable yet;
    the periodic pass judges every one again (a node may have gone)."""
    memo = run.memo
    unfit = sorted({g.shape for g in groups} & run.unfit)
    if not run.full:  # a quick pass judges only shapes no pass has judged yet
        unfit = [shape for shape in unfit if not memo.runnable.get((shape,))]
    if not unfit:
        return
    known = await memo.known(run.session, fresh=run.full)
    if not known and memo.launchable is None:
        return
    for shape in unfit:
        compute = computes[shape]
        runnable = member_fits(compute, known) or (
            memo.launchable is not None and memo.launchable(compute))
        memo.remember(memo.runnable, (shape,), runnable)
        if not runnable:
            reason = (NEVER.format(nodes=len(known)) + "\n"
                      + why_waiting(compute, known))
            run.report.failed += await _fail_shape(run, shape, reason)


async def _fail_shape(run: Pass, shape: str, reason: str) -> int:
    jobs = (await run.session.scalars(select(Job).where(
        Job.state == JobState.PENDING.value, Job.shape == shape, Job.attempt == 0)
        .with_for_update(skip_locked=True))).all()
    for job in jobs:
        job.reason, job.exit_code, job.pending_reason = reason, None, None
        set_job_state(run.session, job, JobState.FAILED, run.now, reason)
    return len(jobs)


async def say_why(run: Pass, computes: dict[str, Compute]) -> None:
    """Tell each shape's waiting jobs why they wait, one statement per shape (only rows whose
    reason changes are written)."""
    memo = run.memo
    room = tuple((r.node.id, r.cpus, r.memory_gib, len(r.devices)) for r in run.rooms)
    for shape, compute in sorted(computes.items()):
        if fits_any(compute, run.rooms):  # room is left that fits: its turn comes
            reason = TURN
        elif (shape, room, memo.version) in memo.reasons:
            reason = memo.reasons[(shape, room, memo.version)]
        else:
            known = await memo.known(run.session)
            reason = _unfit_reason(compute, run.rooms, known, memo.enrolled)
            memo.remember(memo.reasons, (shape, room, memo.version), reason)
        note = memo.note(shape) if memo.note is not None and reason != TURN else None
        if note:
            reason = f"{reason.split(chr(10), 1)[0]}\n{note}"
        statement = _SAY if memo.launchable is None else _SAY_LAUNCHING
        await run.session.execute(statement, {"of_shape": shape, "why": reason})


_SAY = update(Job).where(
    Job.state == JobState.PENDING.value, Job.shape == bindparam("of_shape"),
    or_(Job.pending_reason.is_(None), Job.pending_reason != bindparam("why")),
).values(pending_reason=bindparam("why")).execution_options(synchronize_session=False)
# with clouds: a job a launch is under way for says so (the launcher writes its reason)
_SAY_LAUNCHING = _SAY.where(Job.id.not_in(in_flight_job_ids()))


def _unfit_reason(compute: Compute, rooms: Sequence[Room], known: Sequence[Room],
                  enrolled: int) -> str:
    if not rooms:
        return NOT_CONNECTED if enrolled else NO_NODE_YET
    free = any(room.offers() for room in rooms)
    headline = BUSY if fits_any(compute, known) else NONE_CONNECTED_CAN
    if not free:
        return f"{headline} ({ALL_BUSY})"
    return f"{headline}\n{why_waiting(compute, rooms)}"


async def end_timed_out(session: AsyncSession, now: float) -> int:
    """Fail pending jobs that have waited past their ``pending_timeout_s``."""
    jobs = (await session.scalars(select(Job).where(
        Job.state == JobState.PENDING.value, Job.pending_until.is_not(None),
        Job.pending_until < now).with_for_update(skip_locked=True))).all()
    for job in jobs:
        timeout = spec_of(job).pending_timeout_s
        last = (job.pending_reason or "").split("\n", 1)[0]
        job.reason = (f"waited {timeout:g} s without being placed (pending timeout)"
                      + (f": {last}" if last else ""))
        set_job_state(session, job, JobState.FAILED, now, job.reason)
    return len(jobs)
