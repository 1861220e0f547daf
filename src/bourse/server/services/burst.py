"""Bursting: a running job moves to another Compute (bigger, smaller, or off the exchange).

It is the spot-recovery path with a new Compute, not a new mechanism. The job's running
attempt is marked with the notice time (as a reclaim marks a node's attempts) and its nodes
are told to stop it (SIGTERM, SIGKILL after ``notice_s``): ``BourseCheckpoint`` saves on the
SIGTERM, uploads and exits, and the attempt ends PREEMPTED however it exits. Then
``lifecycle.move_job`` sees ``jobs.burst`` and, instead of a retry, sends the job back to
PENDING with the new Compute and ``resume`` set — no retry counted, no node blocklisted, no
backoff — so placement treats it as any job (a gang when ``num_nodes`` > 1, a launch on a
cloud when no node fits) and its next attempt resumes from the checkpoint. ``local``: the
job ends instead (CANCELLED, saying where its checkpoint is) for ``bourse burst --local`` to
go on from it. The job keeps its id, so whatever follows it by id (its logs, a tracking run)
continues.

Refused, with nothing changed: an unknown job (404), a job that is not running or is being
cancelled or moved already (409), a job without a checkpoint place, and a Compute that no
known node and no cloud offer could ever run (422, the matcher's explanation, as placement
words it).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.compute import Compute
from bourse.core.errors import Conflict, InvalidInput
from bourse.core.placement import member_fits, why_waiting
from bourse.core.states import JobState
from bourse.protocol.api import BurstRequest, BurstResult
from bourse.server.access import Scope
from bourse.server.commands import Command
from bourse.server.db.schema import Attempt, Job
from bourse.server.services import gangs
from bourse.server.services.capacity import Memo
from bourse.server.services.jobs import active_attempt_states, get_job, required_tags, with_tags
from bourse.server.services.lifecycle import add_event
from bourse.server.services.specs import spec_of
from bourse.server.services.waiting import NEVER

LOCAL = "a local run (bourse burst --local)"


async def burst_job(session: AsyncSession, job_id: str, scope: Scope, request: BurstRequest,
                    *, now: float, memo: Memo) -> tuple[BurstResult, list[Command]]:
    """Ask the job's running attempt to checkpoint and exit, and note where it goes next."""
    job = await get_job(session, job_id, scope)
    _check_running(job)
    spec = spec_of(job)
    if spec.checkpoint is None:
        raise InvalidInput(
            f"job {job.id} has no checkpoint place, so a new attempt could not resume: "
            "bursting it would start its training again", field="checkpoint",
            hint="submit it with --checkpoint s3://BUCKET/PREFIX/ (a job with data, spot or "
                 "several nodes gets one by default), and save with BourseCheckpoint")
    target = await _target(session, job, request, memo)
    if target is not None and target == spec.compute:
        raise InvalidInput(f"job {job.id} already runs on {target.describe()}",
                           field="compute", hint="name the Compute to move it to")
    attempts = (await session.scalars(select(Attempt).where(
        Attempt.job_id == job.id, Attempt.number == job.attempt,
        Attempt.state.in_(active_attempt_states())))).all()
    for attempt in attempts:
        attempt.preempt_at = attempt.preempt_at or now
    moved_to = target.describe() if target is not None else LOCAL
    job.burst = record(job.attempt, spec.compute, target, request.reason, now)
    job.updated_at = now
    add_event(session, job.id, job.attempt, "burst", now,
              message=f"moving from {spec.compute.describe()} to {moved_to} "
                      f"({request.reason}): checkpoint and exit within {request.notice_s:g} s",
              data={"from": spec.compute.describe(), "to": moved_to, "why": request.reason,
                    "notice_s": request.notice_s})
    result = BurstResult(job_id=job.id, attempt=job.attempt, checkpoint=spec.checkpoint,
                         moved_from=spec.compute.describe(), moved_to=moved_to,
                         notice_s=request.notice_s)
    return result, gangs.cancel_commands(job, request.notice_s, f"burst: {request.reason}")


def record(attempt: int, source: Compute, target: Compute | None, why: str,
           now: float) -> dict[str, Any]:
    """What ``jobs.burst`` keeps of a move: ``to`` None for a local run."""
    return {"attempt": attempt, "from": source.model_dump(mode="json"),
            "to": None if target is None else target.model_dump(mode="json"),
            "why": why, "at": now}


def _check_running(job: Job) -> None:
    state = JobState(job.state)
    if state is not JobState.RUNNING:
        raise Conflict(f"job {job.id} is {state.value}: only a running job can burst "
                       "(its process checkpoints and exits)",
                       hint="wait until `bourse jobs show` says RUNNING" if not state.terminal
                       else "submit it again with the Compute you want")
    if job.cancel_requested:
        raise Conflict(f"job {job.id} is being cancelled", hint="submit it again")
    if job.burst and job.burst.get("attempt") == job.attempt:
        raise Conflict(f"job {job.id} is moving already (attempt {job.attempt} was asked to "
                       "checkpoint and exit)", hint="wait for its next attempt, then burst it")


async def _target(session: AsyncSession, job: Job, request: BurstRequest,
                  memo: Memo) -> Compute | None:
    """The Compute to move to, with its project's compliance tags, once something could
    run it; None for a local run."""
    if request.local == (request.compute is not None):
        raise InvalidInput("name either the Compute to move the job to or local, not "
                           + ("both" if request.local else "neither"), field="compute",
                           hint="bourse burst JOB --gpu a100:8 --nodes 2, or --local")
    if request.compute is None:
        return None
    target = with_tags(spec_of(job).model_copy(update={"compute": request.compute}),
                       await required_tags(session, job.project_id)).compute
    known = await memo.known(session)
    if member_fits(target, known) or (memo.launchable is not None and memo.launchable(target)):
        return target
    raise InvalidInput(f"cannot burst job {job.id} to {target.describe()}: "
                       + NEVER.format(nodes=len(known)) + "\n" + why_waiting(target, known),
                       field="compute", hint="`bourse offers` and `bourse nodes` show what "
                                             "there is; nothing was changed")
