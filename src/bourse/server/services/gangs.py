"""Gangs, the shell: a multi-node job's members placed, started and ended together.

Placement (``core.gang``) reserves every member at once and writes one attempt row per member
(its ``rank``); only rank 0 is told to start. Its agent chooses a free port on its address,
says which (``rendezvous``), and holds it open; then the other members are started with it,
and each proves it reaches rank 0 there before its process starts (rank 0 starts once all
have). A member that fails, is lost or is preempted ends the attempt for all: the others are
stopped, and the job moves on as one — retried from its last checkpoint (avoiding the node
that failed), or ended. It succeeds when every member has exited 0; its outputs are rank 0's.

Commands decided inside a transaction (stopping the other members) are noted in
``session.info`` and sent after the commit (``note_commands``), like credentials revoked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.states import AttemptState, JobState
from bourse.protocol.agent import CancelJob
from bourse.server.commands import Command, note_commands
from bourse.server.db.schema import Attempt, Job
from bourse.server.services.lifecycle import (
    add_event,
    close_attempt,
    end_attempt,
    move_job,
    note_ended,
    noticed,
    set_job_state,
)
from bourse.server.services.starts import gang_of, start_command

STOP_GRACE_S = 10.0


def is_gang(job: Job) -> bool:
    return job.members is not None and len(job.members) > 1


async def members(session: AsyncSession, job_id: str, number: int) -> list[Attempt]:
    """Every member of the attempt, by rank."""
    rows = (await session.scalars(select(Attempt).where(
        Attempt.job_id == job_id, Attempt.number == number).order_by(Attempt.rank))).all()
    return list(rows)


def placed(session: AsyncSession, job: Job, attempts: Sequence[Attempt], now: float) -> Command:
    """A gang placed: its members' nodes on the job, rank 0 told to start."""
    job.members = [a.node_id for a in attempts]
    where = "; ".join(f"rank {a.rank} on {a.placement}" for a in attempts)
    set_job_state(session, job, JobState.SCHEDULED, now,
                  f"placed {len(attempts)} members together: {where}")
    return start_command(job, attempts[0], gang_of(job, attempts, attempts[0]))


async def rendezvous(session: AsyncSession, job: Job, first: Attempt, data: dict[str, Any],
                     now: float) -> list[Command]:
    """Rank 0 listens on its port: start the other members with it."""
    port = data.get("port")
    if first.rank != 0 or isinstance(port, bool) or not isinstance(port, int) \
            or not 1 <= port <= 65535:
        return []
    gang = await members(session, job.id, first.number)
    for member in gang:
        member.port = port
    add_event(session, job.id, first.number, "info", now, rank=0, message=(
        f"rank 0 listens on {first.address}:{port}; starting ranks 1-{len(gang) - 1}"))
    return [start_command(job, m, gang_of(job, gang, m)) for m in gang
            if m.rank and m.state == AttemptState.SCHEDULED.value]


async def resend(session: AsyncSession, job: Job, member: Attempt) -> list[Command]:
    """A reconnected node's unacknowledged start of a member: rank 0's, or another's once
    rank 0 has said its port."""
    if member.rank and member.port is None:
        return []
    gang = await members(session, job.id, member.number)
    return [start_command(job, member, gang_of(job, gang, member))]


async def end(session: AsyncSession, job: Job, attempt: Attempt, outcome: AttemptState, *,
              now: float, reason: str, exit_code: int | None = None,
              stopped_at: float | None = None, signalled: bool = False) -> None:
    """End an attempt as ``lifecycle.end_attempt`` does; a gang member's end decides for its
    gang: the others are stopped unless it succeeded, and the job moves once. An attempt
    ended already (a member its gang stopped, met again in the same pass) stays as it is."""
    if not AttemptState(attempt.state).active:
        return
    if not is_gang(job) or attempt.number != job.attempt:
        end_attempt(session, job, attempt, outcome, now=now, reason=reason,
                    exit_code=exit_code, stopped_at=stopped_at, signalled=signalled)
        return
    outcome = noticed(attempt, outcome, signalled)
    close_attempt(session, job, attempt, outcome, now=now, reason=reason,
                  exit_code=exit_code, stopped_at=stopped_at, note=False)
    gang = await members(session, job.id, attempt.number)
    active = [m for m in gang if AttemptState(m.state).active]
    if outcome is AttemptState.SUCCEEDED:
        _member_done(session, job, attempt, gang, now=now)
        return
    why = f"rank {attempt.rank} {outcome.value.lower()} ({reason})"
    _stop(session, job, active, f"stopped: its gang's {why}", now)
    note_ended(session, job.id, attempt.number)
    move_job(session, job, attempt, outcome, now=now, reason=f"gang member {why}",
             exit_code=exit_code)


def _member_done(session: AsyncSession, job: Job, attempt: Attempt, gang: Sequence[Attempt],
                 *, now: float) -> None:
    active = [m for m in gang if AttemptState(m.state).active]
    if active:
        add_event(session, job.id, attempt.number, "info", now, rank=attempt.rank,
                  message=f"rank {attempt.rank} exited 0; waiting for {len(active)} more")
        return
    if any(m.state != AttemptState.SUCCEEDED.value for m in gang):
        return  # another member ended otherwise: the job has moved on already
    note_ended(session, job.id, attempt.number)
    move_job(session, job, gang[0], AttemptState.SUCCEEDED, now=now,
             reason=f"all {len(gang)} members exited 0", exit_code=0)


def _stop(session: AsyncSession, job: Job, active: Sequence[Attempt], reason: str,
          now: float) -> None:
    """End the other members and tell their nodes to stop them (after the commit)."""
    for member in active:
        close_attempt(session, job, member, AttemptState.CANCELLED, now=now, reason=reason,
                      note=False)
    note_commands(session.info, [Command(m.node_id, CancelJob(
        job_id=job.id, attempt=m.number, grace_s=STOP_GRACE_S, reason=reason))
        for m in active])


def cancel_commands(job: Job, grace_s: float, reason: str) -> list[Command]:
    """A cancel for every member's node (one node for a one-node job)."""
    nodes = job.members if is_gang(job) and job.members else [job.node_id]
    return [Command(node, CancelJob(job_id=job.id, attempt=job.attempt, grace_s=grace_s,
                                    reason=reason)) for node in nodes if node is not None]
