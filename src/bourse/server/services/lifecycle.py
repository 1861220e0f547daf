"""State changes of jobs and attempts, applied to rows and recorded in the timeline.

The legality of each change is decided by ``core.states``; this module applies it.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core import blocklist
from bourse.core.blocklist import add_failure
from bourse.core.compute import Compute
from bourse.core.cost import attempt_cost, lost_work, total_cost
from bourse.core.placement import shape_of
from bourse.core.retry import cause_of, decide
from bourse.core.states import (
    AttemptState,
    JobState,
    check_attempt,
    check_job,
    job_state_for,
    under_notice,
)
from bourse.server.db.database import defer_insert
from bourse.server.db.schema import Attempt, Event, Job
from bourse.server.services import reliability
from bourse.server.services.specs import remember, spec_of

EVENTS = cast(Table, Event.__table__)
ENDED_INFO = "ended_attempts"  # session.info: (job, attempt) ended in this transaction


def add_event(session: AsyncSession, job_id: str, attempt: int, kind: str, now: float, *,
              state: str | None = None, message: str = "",
              data: dict[str, Any] | None = None, agent_seq: int | None = None,
              rank: int = 0) -> None:
    """Append to a job's timeline (written in one statement when the transaction ends).
    ``rank``: the gang member it concerns (0 for a one-node job)."""
    defer_insert(session, EVENTS, {"job_id": job_id, "attempt": attempt, "rank": rank,
                                   "agent_seq": agent_seq, "time": now, "kind": kind,
                                   "state": state, "message": message, "data": data or {}})


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
                now: float, reason: str, exit_code: int | None = None,
                stopped_at: float | None = None, signalled: bool = False) -> None:
    """Close an attempt and move its job: to the outcome, or back to PENDING for another
    attempt when its retry policy allows (``core.retry``). An attempt whose node gave notice
    of a reclaim ends PREEMPTED unless it finished meanwhile (``signalled``: the node had sent
    it the notice's SIGTERM before it exited, so an exit 0 did not finish its work).
    ``stopped_at``: when its process exited, as its node saw it (the attempt ends later, once
    its outputs are up).

    The attempt is noted in ``session.info[ENDED_INFO]``: once the transaction commits, the
    data plane revokes its store credentials (a network call, so never inside it)."""
    outcome = noticed(attempt, outcome, signalled)
    close_attempt(session, job, attempt, outcome, now=now, reason=reason,
                  exit_code=exit_code, stopped_at=stopped_at)
    move_job(session, job, attempt, outcome, now=now, reason=reason, exit_code=exit_code)


def noticed(attempt: Attempt, outcome: AttemptState, signalled: bool) -> AttemptState:
    """The outcome of an attempt whose node gave notice: PREEMPTED unless it finished."""
    if attempt.preempt_at is None:
        return outcome
    return under_notice(outcome, stopped=signalled)


def move_job(session: AsyncSession, job: Job, attempt: Attempt, outcome: AttemptState, *,
             now: float, reason: str, exit_code: int | None = None) -> None:
    """Move the job on after its (closed) attempt ended so: to the outcome, or back to
    PENDING for another attempt (``core.retry``). Nothing for a stale attempt."""
    if job.attempt != attempt.number or JobState(job.state).terminal:
        return  # a stale attempt ended: the job has moved on
    job.progress = None
    if outcome.interrupted and job.cancel_requested:
        job.reason = f"cancelled; its node was lost ({reason})"
        set_job_state(session, job, JobState.CANCELLED, now, job.reason)
        return
    if moved(session, job, attempt, outcome, now=now):
        return
    if _retried(session, job, attempt, outcome, now=now, reason=reason):
        return
    if outcome.interrupted:
        job.reason = f"attempt {attempt.number} {_WORDS[outcome]} ({reason}); no retries left"
        set_job_state(session, job, JobState.FAILED, now, job.reason)
        return
    job.exit_code, job.reason = exit_code, reason
    set_job_state(session, job, job_state_for(outcome), now, reason)


def close_attempt(session: AsyncSession, job: Job, attempt: Attempt, outcome: AttemptState, *,
                  now: float, reason: str, exit_code: int | None = None,
                  stopped_at: float | None = None, note: bool = True) -> None:
    """End the attempt (its state, lost work and cost), leaving its job where it is.
    ``note``: the attempt's credentials go with it (a gang's go with its last member)."""
    set_attempt_state(attempt, outcome, now, reason)
    reliability.count_ended(session, attempt, outcome)
    attempt.exit_code = exit_code
    if outcome.interrupted:
        attempt.lost_work_s = lost_work(attempt.started_at, stopped_at or attempt.ended_at,
                                        attempt.checkpoint_at, attempt.preempt_at)
    job.cost = total_cost([job.cost, attempt_cost(attempt.price, attempt.started_at,
                                                  attempt.ended_at, now)])
    if note:
        note_ended(session, job.id, attempt.number)


def note_ended(session: AsyncSession, job_id: str, number: int) -> None:
    """After the commit, the data plane revokes the attempt's credentials."""
    session.info.setdefault(ENDED_INFO, []).append((job_id, number))


def succeed_late(session: AsyncSession, job: Job, late: Attempt, current: Attempt | None, *,
                 now: float, outputs: dict[str, str] | None) -> None:
    """An attempt given up as LOST (or PREEMPTED) reports that it exited 0 with its outputs
    up: its work is done, so the job ends SUCCEEDED with its result — once — and the attempt
    placed since, if still active, is cancelled (the caller tells its node to drop it)."""
    check_attempt(AttemptState(late.state), AttemptState.SUCCEEDED)
    late.state, late.exit_code, late.lost_work_s = AttemptState.SUCCEEDED.value, 0, None
    late.reason = "succeeded; its report arrived after the attempt was given up"
    if current is not None and current is not late and AttemptState(current.state).active:
        close_attempt(session, job, current, AttemptState.CANCELLED, now=now,
                      reason=f"not needed: attempt {late.number} had already succeeded")
    if outputs:
        job.outputs = outputs
    job.exit_code, job.node_id, job.progress = 0, late.node_id, None
    job.reason = (f"attempt {late.number} succeeded on {late.node_id}; its report arrived "
                  "after the attempt was given up")
    add_event(session, job.id, late.number, "late_success", now, message=job.reason)
    set_job_state(session, job, JobState.SUCCEEDED, now, job.reason)


def moved(session: AsyncSession, job: Job, attempt: Attempt, outcome: AttemptState, *,
          now: float) -> bool:
    """A burst (``services.burst``) takes effect once the attempt it stopped has ended
    PREEMPTED: the job continues with the new Compute (back to PENDING, resuming; no retry
    counted, nothing blocklisted), or, moved to a local run, ends CANCELLED saying where its
    checkpoint is. Whether it did."""
    burst = job.burst
    if not burst or burst.get("attempt") != attempt.number \
            or outcome is not AttemptState.PREEMPTED:
        return False
    spec = spec_of(job)
    source = Compute.model_validate(burst["from"]).describe()
    if burst.get("to") is None:
        job.reason = (f"moved to a local run after attempt {attempt.number} checkpointed; "
                      f"it goes on from {spec.checkpoint}")
        _moved_event(session, job, attempt, burst, source=source, target="a local run", now=now)
        set_job_state(session, job, JobState.CANCELLED, now, job.reason)
        return True
    target = Compute.model_validate(burst["to"])
    spec = spec.model_copy(update={"compute": target})
    job.spec = spec.model_dump(mode="json")
    job.shape = shape_of(job.spec["compute"])
    remember(job.id, spec)
    job.resume, job.node_id, job.not_before, job.members = True, None, None, None
    timeout = spec.pending_timeout_s
    job.pending_until = None if timeout is None else now + timeout
    _moved_event(session, job, attempt, burst, source=source, target=target.describe(), now=now)
    set_job_state(session, job, JobState.PENDING, now,
                  f"attempt {attempt.number} checkpointed and stopped for a burst; "
                  f"continuing on {target.describe()}")
    return True


def _moved_event(session: AsyncSession, job: Job, attempt: Attempt, burst: dict[str, Any], *,
                 source: str, target: str, now: float) -> None:
    """The timeline's ``moved``: where the run's curves go on from (the tracking read API),
    with the step of the checkpoint the next run resumes from when the node reported it."""
    why, step = burst.get("why"), burst.get("step")
    at = f" at step {step}" if step is not None else ""
    add_event(session, job.id, attempt.number, "moved", now,
              message=f"moved from {source} to {target}{at} ({why})",
              data={"from": source, "to": target, "why": why, "step": step})


def note_checkpoint(job: Job, attempt: Attempt, checkpoint: Any) -> None:
    """A burst's attempt ended with this checkpoint the newest (the node's ``exited``
    report): its step is where the move happens on the run's step axis. A gang's members
    each report one (a member that left before rank 0's upload was whole saw an older
    one), so the highest is kept."""
    burst = job.burst
    step = checkpoint.get("step") if isinstance(checkpoint, dict) else None
    if not burst or burst.get("attempt") != attempt.number or isinstance(step, bool) \
            or not isinstance(step, int) or step < 0:
        return
    known = burst.get("step")
    job.burst = {**burst, "step": step if not isinstance(known, int) else max(known, step)}


_WORDS = {s: s.lower() for s in (AttemptState.LOST, AttemptState.PREEMPTED,
                                  AttemptState.FAILED)}


def _retried(session: AsyncSession, job: Job, attempt: Attempt, outcome: AttemptState, *,
             now: float, reason: str) -> bool:
    """Send the job back to PENDING if its policy allows another attempt; whether it did."""
    cause = cause_of(outcome)
    if cause is None:
        return False
    spec = spec_of(job)
    policy = spec.retry
    counts = dict(job.retry_counts or {})
    decision = decide(policy, job.max_retries, counts, cause, now)
    if not decision.retry:
        return False
    counts[cause] = decision.count
    job.retry_counts, job.retries_used = counts, job.retries_used + 1
    job.not_before, job.resume, job.node_id = decision.not_before, True, None
    timeout = spec.pending_timeout_s
    job.pending_until = None if timeout is None else (decision.not_before or now) + timeout
    if outcome.interrupted:
        job.avoid_nodes = sorted({*job.avoid_nodes, attempt.node_id})
        job.blocklist = [b.json() for b in add_failure(
            blocklist.read(job.blocklist), now, node=attempt.node_id,
            provider=attempt.provider, region=attempt.region)]
    wait = (f", after {decision.not_before - now:.0f} s"
            if decision.not_before is not None else "")
    set_job_state(session, job, JobState.PENDING, now,
                  f"attempt {attempt.number} {_WORDS[outcome]} ({reason}); retrying "
                  f"({decision.count}/{decision.limit}{wait})")
    return True
