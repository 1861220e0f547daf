"""Job and attempt states, and the one place their transitions are checked.

A job moves PENDING -> SCHEDULED -> STARTING -> RUNNING -> SUCCEEDED | FAILED | CANCELLED.
Each placement is an *attempt*; an attempt on a node that is lost (or that never acknowledged
its start) becomes LOST, an attempt stopped by a preemption notice (a spot reclaim) becomes
PREEMPTED, and the job goes back to PENDING for a new attempt, as its retry policy allows
(``core.retry``). The attempt number is the fencing token: only the current attempt may move
the job.

These enums are the one vocabulary of states: the coordinator, the API's models, the SDK, the
CLI and the UI name a state by its member and a group of them by the sets below, never by
its string (``tests/test_state_vocabulary.py`` holds the package to that). A StrEnum equals
its value, so the wire keeps the same strings.
"""

from __future__ import annotations

from enum import StrEnum

from bourse.core.errors import BourseError


class JobState(StrEnum):
    """Where a job is in its lifecycle (above); ``JOB_*`` below group them."""

    PENDING = "PENDING"
    SCHEDULED = "SCHEDULED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self in JOB_TERMINAL

    @property
    def active(self) -> bool:
        """Placed on a node and not ended."""
        return self in JOB_ACTIVE

    @property
    def waiting(self) -> bool:
        """Submitted and not running yet."""
        return self in JOB_WAITING


class AttemptState(StrEnum):
    """How one placement of a job went; ``ATTEMPT_*`` below group them."""

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
        return self in ATTEMPT_TERMINAL

    @property
    def interrupted(self) -> bool:
        """Ended by its node going away, not by the job: the work resumes elsewhere."""
        return self in ATTEMPT_INTERRUPTED

    @property
    def active(self) -> bool:
        return self in ATTEMPT_ACTIVE


# a job's states by what they say of it; PENDING is waiting, not active: it has no node
JOB_TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
"""Ended: nothing moves the job again."""
JOB_LIVE = frozenset(JobState) - JOB_TERMINAL
"""Not ended: waiting or active."""
JOB_WAITING = frozenset({JobState.PENDING, JobState.SCHEDULED, JobState.STARTING})
"""Submitted and not running yet: waiting for a node, or for its node to start it."""
JOB_ACTIVE = frozenset({JobState.SCHEDULED, JobState.STARTING, JobState.RUNNING})
"""Placed on a node and not ended."""

ATTEMPT_INTERRUPTED = frozenset({AttemptState.LOST, AttemptState.PREEMPTED})
"""Ended by its node going away, not by the job: the work resumes elsewhere."""
ATTEMPT_TERMINAL = frozenset({AttemptState.SUCCEEDED, AttemptState.FAILED,
                              AttemptState.CANCELLED, *ATTEMPT_INTERRUPTED})
"""Ended, however (a LOST or PREEMPTED attempt may still turn SUCCEEDED: ``late_success``)."""
ATTEMPT_ACTIVE = frozenset(AttemptState) - ATTEMPT_TERMINAL
"""On its node and not ended: it holds the node's resources."""
ATTEMPT_UNSUCCESSFUL = ATTEMPT_TERMINAL - {AttemptState.SUCCEEDED}
"""Ended without success: its reason says why."""

JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    # PENDING -> SUCCEEDED: a lost attempt's success arrived while the job waited for another
    JobState.PENDING: frozenset({JobState.SCHEDULED, JobState.CANCELLED, JobState.FAILED,
                                 JobState.SUCCEEDED}),
    JobState.SCHEDULED: frozenset({JobState.STARTING, JobState.RUNNING, JobState.PENDING,
                                   *JOB_TERMINAL}),
    JobState.STARTING: frozenset({JobState.RUNNING, JobState.PENDING, *JOB_TERMINAL}),
    JobState.RUNNING: frozenset({JobState.PENDING, *JOB_TERMINAL}),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}

ATTEMPT_TRANSITIONS: dict[AttemptState, frozenset[AttemptState]] = {
    AttemptState.SCHEDULED: frozenset({AttemptState.STARTING, AttemptState.RUNNING,
                                       *ATTEMPT_TERMINAL}),
    AttemptState.STARTING: frozenset({AttemptState.RUNNING, *ATTEMPT_TERMINAL}),
    AttemptState.RUNNING: ATTEMPT_TERMINAL,
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
    notice (its next hello makes it online). A node the exchange launched on a cloud is
    ``launching`` until the cloud made the instance, ``booting`` until its agent says hello,
    and ``terminated`` once the exchange (or the cloud) ended the instance."""

    OFFLINE = "offline"
    ONLINE = "online"
    LOST = "lost"
    RECLAIMED = "reclaimed"
    LAUNCHING = "launching"
    BOOTING = "booting"
    TERMINATED = "terminated"


# nodes that may not take work again until their agent says hello
NODE_GONE = frozenset({NodeState.LOST, NodeState.OFFLINE, NodeState.TERMINATED,
                       NodeState.LAUNCHING, NodeState.BOOTING})


class LaunchState(StrEnum):
    """A launch (``services.launches``): ``requested`` once its row is committed (the cloud is
    called next), ``booting`` once the cloud made the instance, ``ready`` once its agent
    enrolled and was verified as the offer said, ``terminating`` / ``terminated`` when it
    ends; ``failed`` when the cloud made no instance."""

    REQUESTED = "requested"
    BOOTING = "booting"
    READY = "ready"
    TERMINATING = "terminating"
    TERMINATED = "terminated"
    FAILED = "failed"


LAUNCH_IN_FLIGHT = frozenset({LaunchState.REQUESTED, LaunchState.BOOTING})
LAUNCH_LIVE = frozenset({*LAUNCH_IN_FLIGHT, LaunchState.READY, LaunchState.TERMINATING})
