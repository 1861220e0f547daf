"""What a stage returns: ``Result``, and ``StageFailed`` when it did not succeed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bourse.app.data import Data
from bourse.core.errors import BourseError


@dataclass(frozen=True)
class Result:
    """The outcome of one stage (one job)."""

    work: str
    status: str
    exit_code: int | None
    job_id: str | None  # None in local mode
    outputs: dict[str, Data] = field(default_factory=dict)
    checkpoint: str | None = None
    value: Any = None  # what ``Work.run`` returned (JSON-able)
    node: str | None = None
    placement: str | None = None
    duration_s: float | None = None
    cost: float | None = None  # US dollars, when the exchange priced the attempts
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "SUCCEEDED"


class StageFailed(BourseError):
    """A stage did not succeed: carries its job id and the tail of its log."""

    exit_code = 1

    def __init__(self, result: Result, log_tail: str) -> None:
        where = f"job {result.job_id}" if result.job_id else "local run"
        code = f"exit code {result.exit_code}" if result.exit_code is not None else result.status
        super().__init__(f"stage {result.work!r} failed ({where}, {code})",
                         hint=f"last lines of its log:\n{log_tail}" if log_tail else None)
        self.result = result
        self.log_tail = log_tail
