"""What the pages show, computed from the API's views: pure functions of their inputs (and now).

The templates only lay these out, so every decision a page makes (how a timeline groups its
events, which jobs form a run, what an age reads) is tested here as a table of cases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bourse.core.reliability import MIN_OBSERVED_S, Reliability, describe, period
from bourse.core.states import ATTEMPT_UNSUCCESSFUL, JOB_ACTIVE, AttemptState, JobState
from bourse.protocol.api import (
    AttemptView,
    EventView,
    JobView,
    ProviderReliabilityView,
    ReliabilityView,
)
from bourse.protocol.common import Capabilities
from bourse.server.ui.reasons import first_line

JOB_STATES = tuple(s.value for s in JobState)


def ago(seconds: float) -> str:
    """A short age: ``12s``, ``5m``, ``3h``, ``2d``."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def span(seconds: float) -> str:
    """A duration between two events: ``0.25 s``, ``12 s``, ``4 min 3 s``, ``2 h 5 min``."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"


@dataclass(frozen=True)
class JobRow:
    id: str
    name: str
    state: JobState
    compute: str
    node: str
    age: str
    cost: float | None
    note: str  # why it waits, or how it ended: the first line
    detail: str = ""  # all of it (a pending reason may be the matcher's table)


def waiting_reason(job: JobView) -> str | None:
    """Why the job is not placed yet; only while it is PENDING (once placed, the matcher's
    last explanation is stale)."""
    return job.pending_reason if job.state == JobState.PENDING else None


def job_row(job: JobView, node_names: Mapping[str, str], now: float) -> JobRow:
    node = node_names.get(job.node_id, job.node_id) if job.node_id else ""
    note = (job.pending_reason if job.state == JobState.PENDING else job.reason) or ""
    return JobRow(id=job.id, name=job.name or "", state=job.state,
                  compute=job.spec.compute.describe(), node=node,
                  age=ago(now - job.created_at), cost=job.cost,
                  note=first_line(note), detail=note.strip())


@dataclass(frozen=True)
class Step:
    label: str  # a state (PENDING, RUNNING...) or an event kind (cancel, node_lost...)
    is_state: bool
    time: float
    after: str  # time since the step before it
    message: str


@dataclass
class Phase:
    """The events of one attempt (attempt 0: before the first placement)."""

    attempt: int
    node: str = ""
    outcome: AttemptState | None = None  # the attempt's state (None: before the first)
    reason: str = ""
    placement: str = ""
    exit_code: int | None = None
    steps: list[Step] = field(default_factory=list)

    @property
    def title(self) -> str:
        return "Submitted" if self.attempt == 0 else f"Attempt {self.attempt}"

    @property
    def why(self) -> str:
        """The reason to show under it: why the attempt did not succeed, if it did not."""
        return self.reason if self.outcome in ATTEMPT_UNSUCCESSFUL else ""


def timeline(events: Iterable[EventView], attempts: Sequence[AttemptView]) -> list[Phase]:
    """The job's events grouped by attempt, in order, each step with the time since the last."""
    by_number = {a.number: a for a in attempts}
    phases: dict[int, Phase] = {}
    previous: float | None = None
    for event in sorted(events, key=lambda e: e.id):
        phase = phases.get(event.attempt)
        if phase is None:
            phase = phases[event.attempt] = _phase(event.attempt, by_number.get(event.attempt))
        after = "" if previous is None else f"+{span(event.time - previous)}"
        phase.steps.append(Step(label=event.state or event.kind, is_state=event.kind == "state",
                                time=event.time, after=after, message=event.message))
        previous = event.time
    return [phases[n] for n in sorted(phases)]


def _phase(number: int, attempt: AttemptView | None) -> Phase:
    if attempt is None:
        return Phase(number)
    return Phase(number, node=attempt.node_name or attempt.node_id, outcome=attempt.state,
                 reason=attempt.reason or "", placement=attempt.placement or "",
                 exit_code=attempt.exit_code)


@dataclass(frozen=True)
class DataItem:
    role: str  # input, output, checkpoint
    name: str
    uri: str
    stored: bool | None = None  # outputs: uploaded yet (None: not an output)


def data_items(job: JobView) -> list[DataItem]:
    spec, uploaded = job.spec, job.outputs or {}
    items = [DataItem("input", name, uri) for name, uri in sorted(spec.inputs.items())]
    items += [DataItem("output", name, uploaded.get(name, uri), name in uploaded)
              for name, uri in sorted(spec.outputs.items())]
    items += [DataItem("output", name, uri, True)  # kept by the node: its lightning_logs/
              for name, uri in sorted(uploaded.items()) if name not in spec.outputs]
    if spec.checkpoint:
        items.append(DataItem("checkpoint", "checkpoint", spec.checkpoint))
    return items


@dataclass(frozen=True)
class Stage:
    name: str
    job_id: str
    state: JobState
    created_at: float
    node_id: str | None = None
    inputs: Mapping[str, str] = field(default_factory=dict)  # name -> URI, as in its spec
    outputs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Run:
    """An app run: its stages and, for a detached run, its flow driver (the job that runs the
    app's ``Flow`` and submits the stages: the run itself, not one of its stages)."""

    id: str
    stages: tuple[Stage, ...]
    driver: Stage | None = None
    app: str | None = None  # the app's file name

    @property
    def state(self) -> JobState:
        """The driver's, when there is one (as ``bourse runs`` says); else from the stages'."""
        if self.driver is not None:
            return run_state([self.driver.state])
        return run_state([s.state for s in self.stages])

    @property
    def started_at(self) -> float:
        return min(s.created_at for s in (*self.stages, *([self.driver] if self.driver else [])))


def run_state(states: Sequence[JobState]) -> JobState:
    """A run's state from its stages': failed or cancelled if any is, running while any runs."""
    for worst in (JobState.FAILED, JobState.CANCELLED):
        if worst in states:
            return worst
    if any(s in JOB_ACTIVE for s in states):
        return JobState.RUNNING
    if states and all(s == JobState.SUCCEEDED for s in states):
        return JobState.SUCCEEDED
    return JobState.PENDING


def _stage(job: JobView) -> Stage:
    return Stage(job.spec.stage or "driver", job.id, job.state, job.created_at, job.node_id,
                 job.spec.inputs, job.spec.outputs)


def group_runs(jobs: Iterable[JobView]) -> list[Run]:
    """The jobs of app runs (``JobSpec.run``) grouped by run: the job without a stage is its
    flow driver, the others its stages, in the order their latest jobs were submitted (a
    stage's sources come before it: ``core.dataflow``); the newest run first. A stage retried
    under the same name keeps only its latest job."""
    stages: dict[str, dict[str, Stage]] = {}
    drivers: dict[str, Stage] = {}
    apps: dict[str, str | None] = {}
    for job in sorted(jobs, key=lambda j: (j.created_at, j.id)):
        run = job.spec.run
        if run is None:
            continue
        named = stages.setdefault(run, {})
        apps[run] = apps.get(run) or job.spec.app
        if job.spec.stage is None:
            drivers[run] = _stage(job)
        else:
            named.pop(job.spec.stage, None)  # a retry takes the place of the job before it
            named[job.spec.stage] = _stage(job)
    runs = [Run(run_id, tuple(named.values()), drivers.get(run_id), apps[run_id])
            for run_id, named in stages.items()]
    return sorted(runs, key=lambda r: (r.started_at, r.id), reverse=True)


def gpu_summary(caps: Capabilities | None) -> str:
    """``2 x NVIDIA A100-SXM4-80GB (80 GiB)``, several lines for mixed nodes, or ``none``."""
    if caps is None or not caps.gpus:
        return "none"
    counts: dict[str, int] = {}
    for gpu in caps.gpus:
        memory = f" ({gpu.memory_mib / 1024:.0f} GiB)" if gpu.memory_mib else ""
        counts[gpu.name + memory] = counts.get(gpu.name + memory, 0) + 1
    return ", ".join(f"{n} x {name}" for name, n in counts.items())


def percent(share: float | None) -> str:
    """A share as a percentage, ``99.2%``, or ``-`` when there is none (an unmeasured node's
    offer, a cloud's)."""
    return "-" if share is None else f"{share:.1%}"


def measured(view: ReliabilityView) -> Reliability:
    """The API's reliability view as ``core.reliability`` has it (for its ``describe``)."""
    return Reliability(
        observed_s=view.observed_s, availability=view.availability,
        ended=view.attempts_ended, interrupted=view.attempts_interrupted, work_h=view.work_h,
        interruptions_per_hour=view.interruptions_per_hour, score=view.score)


NOT_MEASURED = "not measured yet"


@dataclass(frozen=True)
class ReliabilityCell:
    """The nodes table's RELIABILITY cell: the score, and what it is made of on hover."""

    text: str
    title: str
    measured: bool


def reliability_cell(view: ReliabilityView | None) -> ReliabilityCell:
    """``99.2%`` (hover: ``core.reliability.describe``), ``not measured yet`` before the node
    was watched long enough (hover: for how long it was), ``-`` without a record at all."""
    if view is None:
        return ReliabilityCell("-", NOT_MEASURED, measured=False)
    title = describe(measured(view))
    if view.score is None:
        return ReliabilityCell(NOT_MEASURED, title, measured=False)
    return ReliabilityCell(percent(view.score), title, measured=True)


def watch_time() -> str:
    """How long a node is watched before it has a score (``MIN_OBSERVED_S``): ``an hour``."""
    hours = MIN_OBSERVED_S / 3600
    return "an hour" if hours == 1 else f"{hours:g} hours"


@dataclass(frozen=True)
class ReliabilitySection:
    """The node page's Reliability section: the facts once measured, else why not yet."""

    facts: tuple[tuple[str, str], ...]
    since: float | None  # measured since (the node's enrolment)
    pending: str  # the sentence shown before it is measured ("" once it is)


def reliability_section(view: ReliabilityView | None, enrolled_at: float) -> ReliabilitySection:
    if view is None or view.score is None:
        watched = f" (watched {period(view.observed_s)} so far)" if view is not None else ""
        return ReliabilitySection((), None, (
            f"Not measured yet: the exchange measures a node's reliability once it has watched "
            f"it for {watch_time()}{watched}."))
    rate = view.interruptions_per_hour
    facts: tuple[tuple[str, str], ...] = (
        ("Score", f"{percent(view.score)} (availability × share of attempts not interrupted)"),
        ("Availability", f"{percent(view.availability)} of {period(view.observed_s)} connected"),
        ("Attempts", f"{view.attempts_ended} ended, {view.attempts_interrupted} interrupted "
                     "(lost with the node, or preempted)"),
        ("Work", f"{view.work_h:.1f} h" + (f", {rate:.2f} interruptions per hour of it"
                                           if rate is not None else "")),
    )
    if view.declared is not None:
        verdict = "meets it" if view.meets_declared else "below it"
        facts += (("Declared", f"{percent(view.declared)} by its provider: {verdict}"),)
    return ReliabilitySection(facts, enrolled_at, "")


def provider_cells(view: ProviderReliabilityView) -> dict[str, str]:
    """A provider's row on the nodes page: its nodes' figures together."""
    r = view.reliability
    declared = "-" if r.declared is None else percent(r.declared) + (
        "" if r.meets_declared is None else ": met" if r.meets_declared else ": missed")
    return {"provider": view.provider, "nodes": str(view.nodes),
            "watched": period(r.observed_s), "available": percent(r.availability),
            "interrupted": f"{r.attempts_interrupted} of {r.attempts_ended}",
            "score": NOT_MEASURED if r.score is None else percent(r.score),
            "declared": declared, "title": describe(measured(r))}
