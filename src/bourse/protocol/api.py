"""REST request and response bodies (``/api/v1``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from bourse.core.compute import Compute
from bourse.core.states import AttemptState, JobState, NodeState
from bourse.protocol.agent import StoreAccess
from bourse.protocol.clouds import LaunchView
from bourse.protocol.common import (
    Capabilities,
    DataUri,
    Declared,
    JobSpec,
    ProbeReport,
    VerificationReport,
    Wire,
)
from bourse.protocol.metrics import StallView


class AttemptView(Wire):
    number: int
    rank: int = 0  # a gang member's node rank (several rows share a number)
    node_id: str
    node_name: str | None = None
    state: AttemptState
    placed_at: float
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    reason: str | None = None
    price_per_hour: float | None = None  # the offer it was placed on
    cost: float | None = None  # dollars for the time it ran (so far, while it runs)
    placement: str | None = None  # why this node was chosen
    list_price_per_hour: float | None = None  # on-demand list price of the same hardware
    spot: bool | None = None  # placed at a spot price
    preempted_at: float | None = None  # when its node gave notice of a reclaim
    checkpoint_at: float | None = None  # its last complete checkpoint
    lost_work_s: float | None = None  # interrupted: the work no checkpoint kept
    on_demand_cost: float | None = None  # its useful work at the on-demand list price


class JobView(Wire):
    id: str
    name: str | None = None
    state: JobState
    spec: JobSpec
    created_at: float
    updated_at: float
    attempt: int  # the current attempt number, 0 before the first placement
    node_id: str | None = None
    node_name: str | None = None  # that node's name, where the caller's project sees it
    exit_code: int | None = None
    reason: str | None = None
    pending_reason: str | None = None  # why it is not placed yet (the matcher's explanation)
    cancel_requested: bool = False
    outputs: dict[str, str] | None = None  # output name -> URI, once uploaded (durable)
    progress: str | None = None  # what the node is doing: "inputs: 1.2 GB / 2.0 GB, 310 MB/s"
    cost: float | None = None  # dollars: ended attempts (and, in JobDetail, the running one)
    resume: bool = False  # an attempt was interrupted: the next one resumes (BOURSE_RESUME=1)
    stalled: StallView | None = None  # set while a running job looks stuck (docs/metrics.md)


class JobBatch(Wire):
    """Many jobs in one request (a sweep, an array job); all are accepted or none is."""

    jobs: list[JobSpec] = Field(min_length=1, max_length=1000)


class JobDetail(JobView):
    attempts: list[AttemptView] = Field(default_factory=list)
    lost_work_s: float | None = None  # over all attempts
    on_demand_cost: float | None = None  # the same run's useful work at on-demand prices


class ReclaimRequest(Wire):
    """Reclaim a node: its jobs get SIGTERM and ``notice_s`` seconds to checkpoint and exit."""

    notice_s: float = Field(default=30.0, ge=0, le=3600, allow_inf_nan=False)
    reason: str = Field(default="reclaimed by its provider", max_length=500)


class ReclaimResult(Wire):
    node_id: str
    notice_s: float
    attempts: list[str]  # "job/attempt" given notice


class DrainResult(Wire):
    node_id: str
    drained_at: float  # when it was first drained: no new work from then on
    running: int  # attempts still active there, whatever their project (finishing)


class BurstRequest(Wire):
    """Move a running job to another Compute (``services.burst``): its attempt gets
    SIGTERM and ``notice_s`` seconds to checkpoint and exit, then the job continues as a new
    attempt with ``compute``, resuming from that checkpoint. ``local``: no new attempt; the job
    ends once its checkpoint is saved, for ``bourse burst JOB --local`` to go on from it."""

    compute: Compute | None = None
    local: bool = False
    notice_s: float = Field(default=60.0, ge=0, le=3600, allow_inf_nan=False)
    reason: str = Field(default="burst by its owner", max_length=500)


class BurstResult(Wire):
    job_id: str
    attempt: int  # the attempt asked to checkpoint and exit
    checkpoint: str  # where it saves, and the next attempt resumes from
    moved_from: str  # the Computes, described
    moved_to: str
    notice_s: float


class CostRow(Wire):
    key: str  # the day (YYYY-MM-DD, UTC), node or job
    attempts: int
    cost: float
    on_demand_cost: float | None = None
    lost_work_s: float = 0.0
    preempted: int = 0
    spot_cost: float = 0.0  # what its spot attempts cost
    spot_on_demand_cost: float | None = None  # their useful work at on-demand list prices


class CostSummary(Wire):
    by: Literal["day", "node", "job", "project"]
    since: float | None = None
    rows: list[CostRow]
    total: CostRow
    # nodes the exchange launched: launch to termination, boot and idle apart from job time
    launched: list[LaunchView] = Field(default_factory=list)


class JobList(Wire):
    jobs: list[JobView]
    next: str | None = Field(default=None, description=(
        "Pass as `before` for the next (older) page; null when this page is the last. "
        "Absent from a batch submit's answer."))


class RunView(Wire):
    """One run of an app: its flow driver (when detached) and its stage jobs, summed up."""

    id: str
    app: str | None = None  # the app's file, as its jobs name it (JobSpec.app)
    state: JobState  # CANCELLED once cancelled; else the driver's, when there is one; else
    # RUNNING while a job is not ended, then the state of the last job (a flow stops at its
    # first failed stage)
    stages: int  # stage jobs submitted (retries included)
    started_at: float
    ended_at: float | None = None
    cost: float | None = None  # dollars, summed over its jobs
    driver: str | None = None  # the driver's job id, for a detached run
    cancelled: str | None = None  # why the run was cancelled: stopped, or its driver gone


class RunList(Wire):
    runs: list[RunView]


class RunCancel(Wire):
    """Why a run is cancelled, as its jobs' timelines will say."""

    reason: str = Field(default="cancelled by its owner", min_length=1, max_length=500,
                        pattern=r"^[^\x00]*$")


class RunCancelled(Wire):
    run: str
    reason: str  # why it was cancelled (the first reason, if it was cancelled before)
    jobs: list[str]  # the jobs it cancelled, or asked their nodes to stop


class RunLease(Wire):
    """A run's driver lease, renewed: renew it again within ``renew_every_s``; a run whose
    lease lapses (``lease_until``) is cancelled with its jobs."""

    run: str
    lease_until: float
    renew_every_s: float


class RunEdge(Wire):
    """Stage ``target`` reads what stage ``source`` wrote: one of its input URIs is one of
    ``source``'s output URIs or lies under it (docs/ui.md, "A run as a graph")."""

    source: str  # stage names (JobSpec.stage)
    target: str
    inputs: list[str]  # the target's inputs that read the source's outputs


class RunDetail(RunView):
    jobs: list[JobView] = Field(default_factory=list)  # oldest first
    # the dependencies between its stages (each stage's latest job), by data
    edges: list[RunEdge] = Field(default_factory=list)


class DataSummary(Wire):
    """What the exchange's store holds at a URI (``GET /data/summary``): the object it names,
    or every object below it as a prefix. ``digest`` hashes each object's key, size and ETag,
    so it changes when an object is rewritten with other bytes, added or removed."""

    uri: str
    single: bool  # the URI names one object, not a prefix
    objects: int
    bytes: int
    digest: str


MIN_GRANT_TTL_S, MAX_GRANT_TTL_S = 60.0, 12 * 3600.0


class DataGrantRequest(Wire):
    """``POST /data/credentials``: store credentials for the caller, reading ``read`` and
    reading, writing and deleting below ``write`` (``bourse cp``, ``ls``, ``rm``)."""

    read: list[DataUri] = Field(default_factory=list, max_length=64)
    write: list[DataUri] = Field(default_factory=list, max_length=64)
    ttl_s: float = Field(default=3600.0, ge=MIN_GRANT_TTL_S, le=MAX_GRANT_TTL_S)


class DataGrant(Wire):
    """Short-lived store credentials of the caller's project, scoped to what it asked for and
    may touch; ``store`` holds the endpoint and the key (its secret once, here)."""

    id: str  # DELETE /data/credentials/{id} revokes it before it expires
    read: list[str]
    write: list[str]
    store: StoreAccess


class DataHome(Wire):
    """``GET /data/home``: the exchange's bucket and the caller's project's home in it."""

    store: str  # s3://<bucket>/
    home: str  # s3://<bucket>/projects/<project>/
    project: str


class EventView(Wire):
    id: int
    job_id: str
    attempt: int
    time: float
    kind: str
    state: str | None = None
    message: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class EventList(Wire):
    events: list[EventView]


class LogChunkView(Wire):
    cursor: int
    attempt: int
    rank: int = 0  # the gang member that wrote it (0 for a one-node job, and in old archives)
    seq: int
    stream: Literal["stdout", "stderr"]
    offset: int
    data: str  # base64
    time: float | None = None  # when the agent read it (its clock); None in old archives


class LogPage(Wire):
    chunks: list[LogChunkView]
    cursor: int = Field(description="Pass back as `after` for the next page.")
    done: bool = Field(description="The job has ended and every chunk up to it has been "
                                   "returned: there is no next page.")
    pruned: bool = Field(default=False, description=(
        "The exchange's log retention deleted this job's logs (`bourse server "
        "--log-retention`): no chunk will come."))


class ReliabilityView(Wire):
    """What the exchange measured of a node (docs/market.md, "Measured reliability")."""

    observed_s: float  # since it enrolled
    availability: float  # the share of that time it was connected
    attempts_ended: int
    attempts_interrupted: int  # lost with the node, or preempted
    work_h: float  # run time of the attempts that ended there
    interruptions_per_hour: float | None = None  # of work; None before an hour of it
    score: float | None = None  # availability x share not interrupted; None before an hour
    declared: float | None = None  # the availability its provider declared (--declare-sla)
    meets_declared: bool | None = None  # score >= declared; None when either is missing


class NodeView(Wire):
    id: str
    name: str
    state: NodeState
    capabilities: Capabilities | None = None
    keep_alive_s: float
    last_seen: float | None = None
    connected: bool = False
    price: float | None = None
    running: list[str] = Field(default_factory=list)  # job ids
    created_at: float
    verification_status: Literal["unverified", "pass", "warn", "fail"] = "unverified"
    verified_at: float | None = None
    verification: VerificationReport | None = None
    report: ProbeReport | None = None
    declared: Declared | None = None
    tags: list[str] = Field(default_factory=list)  # compliance tags an admin gave it
    drained_at: float | None = None  # drained then: it takes no new work (`bourse fleets`)
    reliability: ReliabilityView | None = None  # measured by the exchange (core.reliability)


class NodeTags(Wire):
    tags: list[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,31}$")]] = Field(
        max_length=32)


class NodeList(Wire):
    nodes: list[NodeView]


class ProviderReliabilityView(Wire):
    """What the exchange measured of one provider's nodes together: those heard in the last 30
    days (docs/market.md, "Measured reliability")."""

    provider: str
    nodes: int
    reliability: ReliabilityView  # ``declared``: the SLA its nodes agree on, if any


class ProviderReliabilityList(Wire):
    providers: list[ProviderReliabilityView]


class EnrollmentCreate(Wire):
    name: str | None = Field(default=None, max_length=128, pattern=r"^[^\x00]*$")
    expires_in_s: float = Field(default=24 * 3600, gt=0, le=365 * 24 * 3600,
                                strict=True)  # `true` is not one second
    # the project the node will belong to (admins only; a provider enrols into its own)
    project: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    # the whole node's $/h, set by its owner (an SSH fleet's); none: priced by its hardware
    price_per_hour: float | None = Field(default=None, gt=0, le=10_000, allow_inf_nan=False,
                                          strict=True)


class EnrollmentToken(Wire):
    token: str
    expires_at: float
    agent_version: str | None = None  # the coordinator's: what the node's agent should run


class EnrollRequest(Wire):
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")


class EnrollResponse(Wire):
    node_id: str
    credential: str


class OfferQuery(Wire):
    compute: Compute = Field(default_factory=Compute)
    limit: int = Field(default=20, ge=1, le=1000)
    explain: bool = False
    launchable: bool = False  # what the exchange's clouds could launch now, not its live nodes


class OfferView(Wire):
    id: str
    provider: str
    instance_type: str
    node_id: str | None = None
    region: str
    gpu: str | None = None
    gpu_count: int
    cpus: float | None = None
    memory_gib: float | None = None
    price_per_hour: float
    spot: bool
    verified_at: float | None = None
    gpu_memory_mib: int | None = None  # per GPU (a MIG slice: its own)
    gpu_slice: str | None = None  # MIG slices of ``gpu``: their profile ("1g.18gb")
    zone: str | None = None  # a launchable offer's availability zone, where its cloud has one
    sla: float | None = None  # a node's measured reliability score, or a launchable offer's
    # cloud's measured launch success rate (docs/market.md, "Measured reliability")


class OfferList(Wire):
    offers: list[OfferView]
    explanation: list[str] | None = None


class FieldErrorView(Wire):
    field: str | None = None
    error: str


class ErrorView(Wire):
    """The body of every error response; ``details`` lists each invalid field (422 only)."""

    error: str
    field: str | None = None
    hint: str | None = None
    details: list[FieldErrorView] | None = None
