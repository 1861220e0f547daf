"""State changes of jobs and attempts, applied to rows and recorded in the timeline.

The legality of each change is decided by ``core.states``; this module applies it.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.cost import attempt_cost, total_cost
from bourse.core.states import (
    AttemptState,
    JobState,
    after_loss,
    check_attempt,
    check_job,
    job_state_for,
)
from bourse.server.db.database import defer_insert
from bourse.server.db.schema import Attempt, Event, Job

EVENTS = cast(Table, Event.__table__)
ENDED_INFO = "ended_attempts"  # session.info: (job, attempt) ended in this transaction


def add_event(session: AsyncSession, job_id: str, attempt: int, kind: str, now: float, *,
              state: str | None = None, message: str = "",
              data: dict[str, Any] | None = None, agent_seq: int | None = None) -> None:
    """Append to a job's timeline (written in one statement when the transaction ends)."""
    defer_insert(session, EVENTS, {"job_id": job_id, "attempt": attempt, "agent_seq": agent_seq,
                                   "time": now, "kind": kind, "state": state,
                                   "message": message, "data": data or {}})


def set_job_state(session: AsyncSession, job: Job, target: JobState, now: float,
                  message: str = "") -> None:
    check_job(JobState(job.state), target)
    job.state = target.value
    job.updated_at = now
    add_event(session, job.id, job.attempt, "state", now, state=target.value, message=message)


def set_attempt_state(attempt: Attempt, target: AttemptState, now: float,
                      reason: str | None = None) -> None:
    check_attempt(AttemptState(attempt.state), target)
    attempt.state = target.value
    if target.terminal:
        attempt.ended_at = now
        attempt.reason = reason or attempt.reason


def end_attempt(session: AsyncSession, job: Job, attempt: Attempt, outcome: AttemptState, *,
                now: float, reason: str, exit_code: int | None = None) -> None:
    """Close an attempt and move its job: to the outcome, or back to PENDING after a loss.

    The attempt is noted in ``session.info[ENDED_INFO]``: once the transaction commits, the
    data plane revokes its store credentials (a network call, so never inside it)."""
    set_attempt_state(attempt, outcome, now, reason)
    attempt.exit_code = exit_code
    job.cost = total_cost([job.cost, attempt_cost(attempt.price, attempt.started_at,
                                                  attempt.ended_at, now)])
    session.info.setdefault(ENDED_INFO, []).append((job.id, attempt.number))
    if job.attempt != attempt.number or JobState(job.state).terminal:
        return  # a stale attempt ended: the job has moved on
    job.progress = None
    if outcome is AttemptState.LOST:
        _after_loss(session, job, attempt, now, reason)
        return
    job.exit_code, job.reason = exit_code, reason
    set_job_state(session, job, job_state_for(outcome), now, reason)


def _after_loss(session: AsyncSession, job: Job, attempt: Attempt, now: float,
                reason: str) -> None:
    if job.cancel_requested:
        job.reason = f"cancelled; its node was lost ({reason})"
        set_job_state(session, job, JobState.CANCELLED, now, job.reason)
        return
    job.retries_used += 1
    job.avoid_nodes = sorted({*job.avoid_nodes, attempt.node_id})
    target = after_loss(job.retries_used, job.max_retries)
    if target is JobState.PENDING:
        job.node_id = None
        set_job_state(session, job, target, now,
                      f"attempt {attempt.number} lost ({reason}); retrying "
                      f"({job.retries_used}/{job.max_retries})")
    else:
        job.reason = f"attempt {attempt.number} lost ({reason}); no retries left"
        set_job_state(session, job, target, now, job.reason)
