"""Job and attempt states, and the one place their transitions are checked.

A job moves PENDING -> SCHEDULED -> STARTING -> RUNNING -> SUCCEEDED | FAILED | CANCELLED.
Each placement is an *attempt*; an attempt on a node that is lost (or that never acknowledged
its start) becomes LOST, an attempt stopped by a preemption notice (a spot reclaim) becomes
PREEMPTED, and the job goes back to PENDING for a new attempt, as its retry policy allows
(``core.retry``). The attempt number is the fencing token: only the current attempt may move
the job.
"""

from __future__ import annotations

from enum import StrEnum

from bourse.core.errors import BourseError


class JobState(StrEnum):
    PENDING = "PENDING"
    SCHEDULED = "SCHEDULED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self in _JOB_TERMINAL

    @property
    def active(self) -> bool:
        """Placed on a node and not ended."""
        return self in (JobState.SCHEDULED, JobState.STARTING, JobState.RUNNING)


class AttemptState(StrEnum):
    SCHEDULED = "SCHEDULED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    LOST = "LOST"
    PREEMPTED = "PREEMPTED"

    @property
    def terminal(self) -> bool:
        return self in _ATTEMPT_TERMINAL

    @property
    def interrupted(self) -> bool:
        """Ended by its node going away, not by the job: the work resumes elsewhere."""
        return self in (AttemptState.LOST, AttemptState.PREEMPTED)

    @property
    def active(self) -> bool:
        return not self.terminal


_JOB_TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
_ATTEMPT_TERMINAL = frozenset({AttemptState.SUCCEEDED, AttemptState.FAILED,
                               AttemptState.CANCELLED, AttemptState.LOST,
                               AttemptState.PREEMPTED})

_ENDINGS = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}
JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    # PENDING -> SUCCEEDED: a lost attempt's success arrived while the job waited for another
    JobState.PENDING: frozenset({JobState.SCHEDULED, JobState.CANCELLED, JobState.FAILED,
                                 JobState.SUCCEEDED}),
    JobState.SCHEDULED: frozenset({JobState.STARTING, JobState.RUNNING, JobState.PENDING,
                                   *_ENDINGS}),
    JobState.STARTING: frozenset({JobState.RUNNING, JobState.PENDING, *_ENDINGS}),
    JobState.RUNNING: frozenset({JobState.PENDING, *_ENDINGS}),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}

_ATTEMPT_ENDINGS = {AttemptState.SUCCEEDED, AttemptState.FAILED, AttemptState.CANCELLED,
                    AttemptState.LOST, AttemptState.PREEMPTED}
ATTEMPT_TRANSITIONS: dict[AttemptState, frozenset[AttemptState]] = {
    AttemptState.SCHEDULED: frozenset({AttemptState.STARTING, AttemptState.RUNNING,
                                       *_ATTEMPT_ENDINGS}),
    AttemptState.STARTING: frozenset({AttemptState.RUNNING, *_ATTEMPT_ENDINGS}),
    AttemptState.RUNNING: frozenset(_ATTEMPT_ENDINGS),
    AttemptState.SUCCEEDED: frozenset(),
    AttemptState.FAILED: frozenset(),
    AttemptState.CANCELLED: frozenset(),
    # given up, then heard from: an attempt whose exit reached its node's spool succeeded,
    # whatever the coordinator concluded from the node's silence (``late_success``)
    AttemptState.LOST: frozenset({AttemptState.SUCCEEDED}),
    AttemptState.PREEMPTED: frozenset({AttemptState.SUCCEEDED}),
}


class IllegalTransition(BourseError):
    """A state change the lifecycle does not allow (a bug or a stale message)."""

    exit_code = 1
    http_status = 409


def check_job(current: JobState, target: JobState) -> JobState:
    if target not in JOB_TRANSITIONS[current]:
        raise IllegalTransition(f"job cannot go from {current} to {target}")
    return target


def check_attempt(current: AttemptState, target: AttemptState) -> AttemptState:
    if target not in ATTEMPT_TRANSITIONS[current]:
        raise IllegalTransition(f"attempt cannot go from {current} to {target}")
    return target


def exit_outcome(exit_code: int | None, cancel_requested: bool) -> AttemptState:
    """How an attempt that exited ended: cancelled if asked to stop, else by its exit code."""
    if cancel_requested:
        return AttemptState.CANCELLED
    return AttemptState.SUCCEEDED if exit_code == 0 else AttemptState.FAILED


def late_success(attempt: AttemptState, job: JobState, cancel_requested: bool) -> bool:
    """Whether a success reported by an attempt the coordinator had given up (LOST or
    PREEMPTED) is taken: the job has not ended and nobody asked to stop it."""
    return attempt.interrupted and not job.terminal and not cancel_requested


def job_state_for(attempt: AttemptState) -> JobState:
    """The job state that mirrors a (not interrupted) attempt state."""
    return JobState(attempt.value)


def under_notice(outcome: AttemptState, stopped: bool = False) -> AttemptState:
    """How an attempt ends once its node gave notice of a preemption: PREEMPTED, unless it
    finished (successfully) or was cancelled meanwhile. ``stopped``: it exited after the
    notice's SIGTERM reached it — an exit 0 then is no success (Lightning's own SIGTERM
    handling exits 0 with its training cut short), so it is PREEMPTED and resumes."""
    if outcome is AttemptState.CANCELLED or (outcome is AttemptState.SUCCEEDED and not stopped):
        return outcome
    return AttemptState.PREEMPTED


class NodeState(StrEnum):
    """What a node row says of its agent: ``offline`` from enrolment until its agent first
    connects, ``online`` while it is connected (or away within its loss window), ``lost``
    once silent for its loss window (``core.liveness``), ``reclaimed`` once its provider gave
    notice (its next hello makes it online)."""

    OFFLINE = "offline"
    ONLINE = "online"
    LOST = "lost"
    RECLAIMED = "reclaimed"
