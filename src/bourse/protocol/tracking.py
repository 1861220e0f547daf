"""The JSON read API of experiment tracking (``/api/v1/tracking``): what the UI and the CLI
read (experiments, runs with params, tags, latest metrics and cost, downsampled curves)."""

from __future__ import annotations

from pydantic import Field

from bourse.protocol.api import AttemptView
from bourse.protocol.common import Wire


class ExperimentView(Wire):
    experiment_id: str
    name: str
    lifecycle_stage: str
    created_at: float
    tags: dict[str, str] = Field(default_factory=dict)


class ExperimentList(Wire):
    experiments: list[ExperimentView]


class LatestMetric(Wire):
    value: float | None  # None: NaN
    step: int
    timestamp: int  # ms
    count: int  # points stored for this key


class RunView(Wire):
    run_id: str
    experiment_id: str
    name: str
    status: str
    lifecycle_stage: str
    start_time: int  # ms
    end_time: int | None = None
    job_id: str | None = None
    params: dict[str, str] = Field(default_factory=dict)
    tags: dict[str, str] = Field(default_factory=dict)
    metrics: dict[str, LatestMetric] = Field(default_factory=dict)


class RunList(Wire):
    runs: list[RunView]
    next_offset: int | None = None  # pass as ``offset`` for the next page


class RunMove(Wire):
    """Where a job's run moved to other compute (a burst: the timeline's ``moved`` event); the
    run goes on, its step axis continued from the checkpoint."""

    time: float  # when the stopped attempt had checkpointed and the job moved (epoch seconds)
    attempt: int  # the attempt that stopped; the next one resumes
    from_compute: str
    to_compute: str
    why: str | None = None
    # the step of the checkpoint the next attempt resumed from: the stopped attempt's points
    # are below it, the next one's from it on; None when the node reported no checkpoint
    step: int | None = None


class TrackedRunDetail(RunView):
    """A run; a job's with its attempts, each priced (preempted ones too), its cost, and the
    moves of a burst, oldest first."""

    attempts: list[AttemptView] = Field(default_factory=list)
    moves: list[RunMove] = Field(default_factory=list)
    cost: float | None = None
    job_state: str | None = None


class SeriesView(Wire):
    run_id: str
    key: str
    total: int  # points stored
    points: list[tuple[float, float]]  # (step, value), downsampled to at most ``points``


class ChartView(Wire):
    series: list[SeriesView]
