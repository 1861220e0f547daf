"""Retry policy: whether an ended attempt sends its job back to PENDING, and after how long.

Three causes, each with its own limit: a preemption (the node was reclaimed with notice —
retried by default, up to a limit, since the job did nothing wrong), a node loss (the node
went silent or never acknowledged the start — ``max_retries`` of the spec by default) and a
failure (the process exited non-zero — never retried by default). A retry waits
``backoff_s * 2**(n-1)`` seconds (at most ``backoff_max_s``) after the n-th retry of that
cause, so a job that keeps failing does not spin. Pure: counts and times are passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bourse.core.states import AttemptState

Cause = Literal["preemption", "node_loss", "failure"]
CAUSES: tuple[Cause, ...] = ("preemption", "node_loss", "failure")
DEFAULT_PREEMPTION_RETRIES = 100


class RetryPolicy(BaseModel):
    """Per cause, how many retries a job gets; ``on_node_loss`` None means the spec's
    ``max_retries``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    # strict: `true` is neither a count nor one second
    on_preemption: int = Field(default=DEFAULT_PREEMPTION_RETRIES, ge=0, le=10_000,
                               strict=True)
    on_node_loss: int | None = Field(default=None, ge=0, le=10_000, strict=True)
    on_failure: int = Field(default=0, ge=0, le=10_000, strict=True)
    backoff_s: float = Field(default=0.0, ge=0, le=3600, allow_inf_nan=False, strict=True)
    backoff_max_s: float = Field(default=300.0, ge=0, le=86400, allow_inf_nan=False,
                                 strict=True)

    def limit(self, cause: Cause, max_retries: int) -> int:
        if cause == "preemption":
            return self.on_preemption
        if cause == "failure":
            return self.on_failure
        return max_retries if self.on_node_loss is None else self.on_node_loss

    def delay(self, retry: int) -> float:
        """Seconds to wait before the ``retry``-th retry (1-based) of one cause."""
        if retry <= 0 or self.backoff_s <= 0:
            return 0.0
        return min(self.backoff_max_s, self.backoff_s * 2.0 ** min(retry - 1, 60))


@dataclass(frozen=True, slots=True)
class Decision:
    retry: bool
    cause: Cause
    count: int  # retries of this cause, this one included when it retries
    limit: int
    not_before: float | None  # when it may be placed again; None: at once


def cause_of(outcome: AttemptState) -> Cause | None:
    """Which limit an ending counts against; None for endings that are never retried."""
    return _CAUSES.get(outcome)


_CAUSES: dict[AttemptState, Cause] = {AttemptState.PREEMPTED: "preemption",
                                      AttemptState.LOST: "node_loss",
                                      AttemptState.FAILED: "failure"}


def decide(policy: RetryPolicy, max_retries: int, counts: dict[str, int], cause: Cause,
           now: float) -> Decision:
    """Whether to retry after an ending of ``cause``, given the retries already used."""
    used = counts.get(cause, 0)
    limit = policy.limit(cause, max_retries)
    if used >= limit:
        return Decision(False, cause, used, limit, None)
    delay = policy.delay(used + 1)
    return Decision(True, cause, used + 1, limit, now + delay if delay > 0 else None)
