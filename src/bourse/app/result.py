"""What a stage returns: ``Result``, and ``StageFailed`` when it did not succeed; ``Outputs``,
the mapping of a stage's outputs by name, which names what is wrong with a name it lacks."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bourse.app.data import Data
from bourse.core.errors import BourseError, InvalidInput
from bourse.core.states import JobState

V = TypeVar("V")


class Outputs(dict[str, V]):
    """A stage's outputs by name (``Data`` in the flow, local ``Path``s in the stage's body).
    ``outputs["model"]`` for a name the stage did not declare raises :class:`UnknownOutput`
    (a ``KeyError``) naming the stage, the name, the declared outputs and the nearest one."""

    def __init__(self, items: Mapping[str, V] | Iterable[tuple[str, V]] = (), /, *,
                 stage: str = "", declared: Iterable[str] | None = None,
                 status: JobState = JobState.SUCCEEDED) -> None:
        super().__init__(items)
        self.stage, self.status = stage, status
        self.declared = tuple(self) if declared is None else tuple(declared)

    def __missing__(self, name: str) -> V:
        raise UnknownOutput(name, self.stage, self.declared, self.status)


class UnknownOutput(InvalidInput, KeyError):
    """An output a stage did not declare, or did not upload because it did not succeed."""

    def __init__(self, name: str, stage: str, declared: tuple[str, ...],
                 status: JobState) -> None:
        if name in declared:
            super().__init__(f"stage {stage!r} has no output {name!r}: it ended {status}, so "
                             "nothing was uploaded", field="outputs")
            return
        near = difflib.get_close_matches(str(name), declared, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        super().__init__(
            f"stage {stage!r} has no output {name!r}; it declares "
            f"{', '.join(map(repr, declared)) or 'no outputs'}", field="outputs",
            hint=hint + f"a stage names its outputs: outputs = ({name!r},) on its class, or "
                        f"outputs=[{name!r}] when constructing it")


@dataclass(frozen=True)
class Result:
    """The outcome of one stage (one job). ``status``: how its job ended (SUCCEEDED, FAILED,
    or CANCELLED on an exchange; a local stage's exit code says SUCCEEDED or FAILED).
    ``attributes``: what the stage's body set on ``self`` (JSON), set on the Work in the flow
    when it succeeded (docs/app.md)."""

    work: str
    status: JobState
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
    attributes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", JobState(self.status))  # a cached result's string
        if not isinstance(self.outputs, Outputs):
            object.__setattr__(self, "outputs", Outputs(self.outputs, stage=self.work,
                                                        status=self.status))

    @property
    def ok(self) -> bool:
        return self.status == JobState.SUCCEEDED


class StageFailed(BourseError):
    """A stage did not succeed: carries its job id and the tail of its log."""

    exit_code = 1

    def __init__(self, result: Result, log_tail: str) -> None:
        where = f"job {result.job_id}" if result.job_id else "local run"
        code = f"exit code {result.exit_code}" if result.exit_code is not None else None
        state = str(result.status) if result.status is not JobState.FAILED else None
        how = ", ".join(c for c in (state, code) if c) or str(result.status)
        super().__init__(f"stage {result.work!r} failed ({where}, {how})",
                         hint=f"last lines of its log:\n{log_tail}" if log_tail else None)
        self.result = result
        self.log_tail = log_tail
