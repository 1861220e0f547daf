"""Tables. Times are UNIX seconds (floats) so that SQLite and PostgreSQL behave the same.

Every change here needs an Alembic migration in ``migrations/versions``; a test compares the
migrated database with these models.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# 64-bit row ids (cursors of the timeline and the logs) on PostgreSQL; SQLite's rowid is
# already 64-bit and must be declared INTEGER to autoincrement.
ROW_ID = BigInteger().with_variant(Integer, "sqlite")
# Store keys compared byte by byte, so that a range of keys is a range of prefixes: SQLite's
# default collation (BINARY) does; PostgreSQL's needs "C".
STORE_KEY = String(1024).with_variant(postgresql.VARCHAR(1024, collation="C"), "postgresql")


class Base(DeclarativeBase):
    pass


DEFAULT_PROJECT = "default"  # where everything made before projects existed lives


class Project(Base):
    """A tenant: its jobs, bundles, secrets, tokens and nodes are invisible to other projects.
    ``required_tags``: compliance tags a node must carry to run the project's jobs."""

    __tablename__ = "projects"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # its name
    required_tags: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[float] = mapped_column(Float)
    clouds: Mapped[list[str] | None] = mapped_column(JSON)  # clouds it may launch on; None: all
    cap_hour: Mapped[float | None] = mapped_column(Float)  # $/h of its launched nodes, at most
    cap_day: Mapped[float | None] = mapped_column(Float)  # $ of launched nodes per UTC day


class Token(Base):
    """API tokens, enrolment tokens and node credentials — only their SHA-256 is stored.
    User and enrolment tokens belong to a project (a node's credential: its node's)."""

    __tablename__ = "tokens"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # user | enroll | node
    hash: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str | None] = mapped_column(String(128))
    role: Mapped[str | None] = mapped_column(String(32))
    node_id: Mapped[str | None] = mapped_column(String(40))
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float)
    used_at: Mapped[float | None] = mapped_column(Float)
    revoked_at: Mapped[float | None] = mapped_column(Float)
    project_id: Mapped[str | None] = mapped_column(String(64))
    price: Mapped[float | None] = mapped_column(Float)  # enrol: the node's $/h, its owner's


class Node(Base):
    __tablename__ = "nodes"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(16))  # a core.states.NodeState
    capabilities: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    keep_alive_s: Mapped[float] = mapped_column(Float)
    last_seen: Mapped[float | None] = mapped_column(Float)
    session: Mapped[str | None] = mapped_column(String(40))  # the live connection, if any
    price: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    fingerprint: Mapped[str | None] = mapped_column(String(64))
    verification_status: Mapped[str] = mapped_column(String(16), default="unverified")
    verified_at: Mapped[float | None] = mapped_column(Float)
    verification: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    declared: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    reclaimed_at: Mapped[float | None] = mapped_column(Float)  # preemption notice; cleared by hello
    project_id: Mapped[str] = mapped_column(String(64), default=DEFAULT_PROJECT)  # its provider
    tags: Mapped[list[str] | None] = mapped_column(JSON, default=list)  # compliance tags
    launch_id: Mapped[str | None] = mapped_column(String(40))  # the exchange launched it
    drained_at: Mapped[float | None] = mapped_column(Float)  # takes no new work since then
    # what the exchange measures of it (core.reliability, services.reliability)
    up_s: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    up_since: Mapped[float | None] = mapped_column(Float)
    attempts_ended: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    attempts_interrupted: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    work_s: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    reliability: Mapped[float | None] = mapped_column(Float)  # the score, refreshed each minute


class Job(Base):
    __tablename__ = "jobs"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str | None] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(16))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    node_id: Mapped[str | None] = mapped_column(String(40))
    exit_code: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str | None] = mapped_column(Text)
    pending_reason: Mapped[str | None] = mapped_column(Text)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    retries_used: Mapped[int] = mapped_column(Integer, default=0)
    max_retries: Mapped[int] = mapped_column(Integer, default=3)
    avoid_nodes: Mapped[list[str]] = mapped_column(JSON, default=list)
    lease_owner: Mapped[str | None] = mapped_column(String(64))
    lease_until: Mapped[float | None] = mapped_column(Float)
    outputs: Mapped[dict[str, str] | None] = mapped_column(JSON)  # name -> URI, once durable
    progress: Mapped[str | None] = mapped_column(Text)  # the node's last progress line
    cost: Mapped[float | None] = mapped_column(Float)  # dollars billed for its ended attempts
    logs_archive: Mapped[str | None] = mapped_column(String(200))  # key in the store, if moved
    blocklist: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)  # core.blocklist
    retry_counts: Mapped[dict[str, int] | None] = mapped_column(JSON)  # cause -> retries used
    not_before: Mapped[float | None] = mapped_column(Float)  # retry backoff
    resume: Mapped[bool] = mapped_column(Boolean, default=False)  # an attempt was interrupted
    run: Mapped[str | None] = mapped_column(String(64))  # the app run it belongs to
    project_id: Mapped[str] = mapped_column(String(64), default=DEFAULT_PROJECT)
    stalled: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # evidence, while stalled
    shape: Mapped[str | None] = mapped_column(String(16))  # digest of its Compute (placement)
    pending_until: Mapped[float | None] = mapped_column(Float)  # its pending timeout, if any
    # the values of the env variables the spec marks secret, sealed (``services.secrets``);
    # ``spec`` holds them redacted
    sealed_env: Mapped[bytes | None] = mapped_column(LargeBinary)
    # a gang's current attempt: its members' nodes, by rank (``services.gangs``)
    members: Mapped[list[str] | None] = mapped_column(JSON)
    # a move to another Compute under way (``services.burst``): attempt, from, to, why
    burst: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    __table_args__ = (Index("ix_jobs_state_created", "state", "created_at", "id"),
                      Index("ix_jobs_run", "run"),
                      Index("ix_jobs_created", "created_at", "id"),  # listing (`GET /jobs`)
                      Index("ix_jobs_project_created", "project_id", "created_at", "id"),
                      Index("ix_jobs_pending", "state", "project_id", "shape", "created_at"),
                      Index("ix_jobs_state_pending_until", "state", "pending_until"))


class Attempt(Base):
    __tablename__ = "attempts"
    job_id: Mapped[str] = mapped_column(String(40), ForeignKey("jobs.id"), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    # a gang's member (``services.gangs``): its node rank; 0 for a one-node job
    rank: Mapped[int] = mapped_column(Integer, primary_key=True, default=0,
                                      server_default="0")
    node_id: Mapped[str] = mapped_column(String(40))
    state: Mapped[str] = mapped_column(String(16))
    placed_at: Mapped[float] = mapped_column(Float)
    start_deadline: Mapped[float] = mapped_column(Float)  # the placement lease
    start_acked_at: Mapped[float | None] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str | None] = mapped_column(Text)
    placement: Mapped[str | None] = mapped_column(Text)
    resources: Mapped[dict[str, Any]] = mapped_column(JSON)
    price: Mapped[float | None] = mapped_column(Float)  # $/h of the offer it was placed on
    list_price: Mapped[float | None] = mapped_column(Float)  # on-demand $/h of that hardware
    spot: Mapped[bool | None] = mapped_column(Boolean)  # placed at a spot price
    provider: Mapped[str | None] = mapped_column(String(64))
    region: Mapped[str | None] = mapped_column(String(64))
    preempt_at: Mapped[float | None] = mapped_column(Float)  # when its node gave notice
    checkpoint_at: Mapped[float | None] = mapped_column(Float)  # its last complete checkpoint
    lost_work_s: Mapped[float | None] = mapped_column(Float)  # work no checkpoint kept
    address: Mapped[str | None] = mapped_column(String(64))  # a gang member's, as peers dial it
    port: Mapped[int | None] = mapped_column(Integer)  # its gang's MASTER_PORT, once chosen
    __table_args__ = (Index("ix_attempts_node_state", "node_id", "state"),)


class Event(Base):
    """The job timeline: state changes and what agents reported, in arrival order."""

    __tablename__ = "events"
    id: Mapped[int] = mapped_column(ROW_ID, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(40), ForeignKey("jobs.id"))
    attempt: Mapped[int] = mapped_column(Integer)
    rank: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    agent_seq: Mapped[int | None] = mapped_column(Integer)
    time: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(32))
    state: Mapped[str | None] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    __table_args__ = (
        UniqueConstraint("job_id", "attempt", "rank", "agent_seq",
                         name="uq_events_agent_seq"),
        Index("ix_events_job", "job_id", "id"),
    )


class LogChunk(Base):
    __tablename__ = "log_chunks"
    id: Mapped[int] = mapped_column(ROW_ID, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(40), ForeignKey("jobs.id"))
    attempt: Mapped[int] = mapped_column(Integer)
    rank: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    seq: Mapped[int] = mapped_column(Integer)
    stream: Mapped[str] = mapped_column(String(8))
    offset: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    time: Mapped[float] = mapped_column(Float)
    __table_args__ = (
        UniqueConstraint("job_id", "attempt", "rank", "seq", name="uq_log_chunks_seq"),
        Index("ix_log_chunks_job", "job_id", "id"),
        # ids are cursors: never reused after rows move to the log archive (SQLite would
        # otherwise hand out max(id) + 1 again once the newest rows are deleted)
        {"sqlite_autoincrement": True},
    )


class Bundle(Base):
    """Code bundles, content-addressed by SHA-256; the bytes live in the store
    (``s3://<bucket>/bundles/<sha256>.tar.gz``) or, without one, in the data dir."""

    __tablename__ = "bundles"
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(Float)


class BundleOwner(Base):
    """Which projects uploaded a bundle: the bytes are shared, knowing of them is not."""

    __tablename__ = "bundle_owners"
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(String(64), primary_key=True)


class Secret(Base):
    """A project's secret, encrypted with the server key (AES-GCM; never returned)."""

    __tablename__ = "secrets"
    project_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    ciphertext: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class AuditRecord(Base):
    """The audit trail: append-only; each row's ``hash`` covers its fields and the previous
    row's hash (keyed with the server key), so an edited or deleted row breaks the chain."""

    __tablename__ = "audit"
    id: Mapped[int] = mapped_column(ROW_ID, primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(Float)
    actor: Mapped[str] = mapped_column(String(80))  # token id or node id, "-" when unknown
    actor_kind: Mapped[str] = mapped_column(String(16))  # user | node | enroll | anonymous
    project_id: Mapped[str | None] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(64))  # the client's address
    action: Mapped[str] = mapped_column(String(128))
    target: Mapped[str] = mapped_column(String(512))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    outcome: Mapped[str] = mapped_column(String(64))
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))
    __table_args__ = (Index("ix_audit_time", "time"),)


class AuditHead(Base):
    """The chain's head (one row): its length and last hash. Writers lock it, so the chain
    never forks, and deleting the newest rows is detected."""

    __tablename__ = "audit_head"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    count: Mapped[int] = mapped_column(BigInteger)
    hash: Mapped[str] = mapped_column(String(64))


class MetricSample(Base):
    """Resource samples of running jobs (``job_id`` set) and of nodes (``job_id`` NULL): raw
    (``period_s`` 0) for a few hours, then one row of means per minute (``period_s`` 60).
    ``data`` is the sample as the agent sent it (``bourse.protocol.metrics.Sample``); the
    columns are what queries filter or aggregate on."""

    __tablename__ = "metric_samples"
    id: Mapped[int] = mapped_column(ROW_ID, primary_key=True, autoincrement=True)
    node_id: Mapped[str] = mapped_column(String(40))
    job_id: Mapped[str | None] = mapped_column(String(40))
    attempt: Mapped[int | None] = mapped_column(Integer)
    time: Mapped[float] = mapped_column(Float)
    period_s: Mapped[float] = mapped_column(Float, default=0.0)
    cpu_percent: Mapped[float | None] = mapped_column(Float)
    gpu_percent: Mapped[float | None] = mapped_column(Float)  # its busiest GPU; NULL: none
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    __table_args__ = (
        Index("ix_metric_samples_job", "job_id", "time"),
        Index("ix_metric_samples_node", "node_id", "time"),
        Index("ix_metric_samples_period", "period_s", "time"),
    )


class StoreClaim(Base):
    """A store prefix (``scheme://bucket/prefix``, ``prefix`` empty or ending in ``/``) that a
    project's job wrote first: only that project's jobs may read or write where it overlaps
    (``bourse.server.services.claims``). Kept when the job ends, as the data is."""

    __tablename__ = "store_claims"
    scheme: Mapped[str] = mapped_column(String(16), primary_key=True)
    bucket: Mapped[str] = mapped_column(String(255), primary_key=True)
    prefix: Mapped[str] = mapped_column(STORE_KEY, primary_key=True)
    project_id: Mapped[str] = mapped_column(String(64))
    job_id: Mapped[str] = mapped_column(String(40))  # the job that claimed it
    created_at: Mapped[float] = mapped_column(Float)


class Run(Base):
    """An app run's driver lease. The driver (``bourse run app.py``, in a terminal or as a
    detached run's job) renews it; one that stops renewing, or that is stopped, ends the run:
    its jobs are cancelled (``bourse.server.services.runs``). A run is its jobs
    (``Job.run``); this row only says whether its driver is still there. ``lease_until`` is
    None once the run ended; ``cancelled`` says why it was cancelled, None if it was not."""

    __tablename__ = "runs"
    project_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[float] = mapped_column(Float)
    lease_until: Mapped[float | None] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)
    cancelled: Mapped[str | None] = mapped_column(Text)
    __table_args__ = (Index("ix_runs_lease_until", "lease_until"),)


class Launch(Base):
    """A machine the exchange launched on a cloud for a pending job (``services.launches``).

    The row and its ``client_token`` are committed before the cloud is called, so that a
    coordinator that dies mid-launch finds, after a restart, every instance it may have made
    (the reconciler matches the cloud's tagged instances to these rows). ``state``: a
    ``core.states.LaunchState``. Cost runs from ``launched_at`` to ``terminated_at`` at
    ``price``."""

    __tablename__ = "launches"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    node_id: Mapped[str] = mapped_column(String(40))
    job_id: Mapped[str | None] = mapped_column(String(40))  # the job it was launched for
    project_id: Mapped[str] = mapped_column(String(64))
    provider: Mapped[str] = mapped_column(String(32))
    region: Mapped[str] = mapped_column(String(64))
    zone: Mapped[str | None] = mapped_column(String(64))
    instance_type: Mapped[str] = mapped_column(String(64))
    spot: Mapped[bool] = mapped_column(Boolean, default=False)
    price: Mapped[float] = mapped_column(Float)  # $/h, as launched
    on_demand: Mapped[float | None] = mapped_column(Float)  # the offer's on-demand $/h
    offer: Mapped[dict[str, Any]] = mapped_column(JSON)  # what the offer promised
    client_token: Mapped[str] = mapped_column(String(64))
    instance_id: Mapped[str | None] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))
    requested_at: Mapped[float] = mapped_column(Float)
    launched_at: Mapped[float | None] = mapped_column(Float)
    enrolled_at: Mapped[float | None] = mapped_column(Float)
    idle_since: Mapped[float | None] = mapped_column(Float)
    terminated_at: Mapped[float | None] = mapped_column(Float)
    reason: Mapped[str | None] = mapped_column(Text)  # why it ended, or what it waits for
    gang: Mapped[str | None] = mapped_column(String(40))  # shared by a gang's members
    __table_args__ = (Index("ix_launches_state", "state"), Index("ix_launches_job", "job_id"),
                      Index("ix_launches_gang", "gang"))


class LaunchBlockRow(Base):
    """Offers not to launch for a while (``core.launch``): the key names what is blocked."""

    __tablename__ = "launch_blocks"
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    until: Mapped[float] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text)


class Setting(Base):
    """Exchange-wide values made once (the exchange's id, which tags its cloud instances)."""

    __tablename__ = "settings"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class ServiceRow(Base):
    """A service (issue 20): replicas of a serving job behind the gateway. ``stable`` and
    ``canary`` are version numbers; ``step`` is the canary's step while a rollout runs."""

    __tablename__ = "services"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))  # running | stopped
    stable: Mapped[int | None] = mapped_column(Integer)
    canary: Mapped[int | None] = mapped_column(Integer)
    step: Mapped[int | None] = mapped_column(Integer)
    step_since: Mapped[float | None] = mapped_column(Float)
    rollout_since: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    __table_args__ = (UniqueConstraint("project_id", "name", name="uq_services_name"),)


class ServiceVersion(Base):
    """One version of a service: the job each replica runs and the policy, by digest."""

    __tablename__ = "service_versions"
    service_id: Mapped[str] = mapped_column(String(40), ForeignKey("services.id"),
                                            primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64))
    job: Mapped[dict[str, Any]] = mapped_column(JSON)
    policy: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16))  # protocol.services.VersionState
    created_at: Mapped[float] = mapped_column(Float)
    reason: Mapped[str | None] = mapped_column(Text)


class ServiceReplica(Base):
    """A replica: an ordinary job, of one version of one service."""

    __tablename__ = "service_replicas"
    job_id: Mapped[str] = mapped_column(String(40), ForeignKey("jobs.id"), primary_key=True)
    service_id: Mapped[str] = mapped_column(String(40), ForeignKey("services.id"))
    version: Mapped[int] = mapped_column(Integer)
    port: Mapped[int] = mapped_column(Integer)  # its own ($PORT): replicas may share a node
    created_at: Mapped[float] = mapped_column(Float)
    ended: Mapped[bool] = mapped_column(Boolean, default=False)  # its job is terminal
    __table_args__ = (Index("ix_service_replicas_service", "service_id", "ended"),)


class ServiceEvent(Base):
    """A service's timeline: versions applied, steps, decisions with their reasons, replicas
    replaced; ``kind`` ``figures`` rows are the gateway's periodic figures (charts)."""

    __tablename__ = "service_events"
    id: Mapped[int] = mapped_column(ROW_ID, primary_key=True, autoincrement=True)
    service_id: Mapped[str] = mapped_column(String(40), ForeignKey("services.id"))
    time: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(16))
    version: Mapped[int | None] = mapped_column(Integer)
    message: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    __table_args__ = (Index("ix_service_events_service", "service_id", "id"),)


# The tracking tables live in their own module (issue 23), imported last (they need ``Base``)
# and re-exported, so that ``Base.metadata`` and ``from bourse.server.db.schema import ...``
# hold them as before.
from bourse.server.db.tracking_schema import TrackingBucket as TrackingBucket  # noqa: E402, PLC0414
from bourse.server.db.tracking_schema import TrackingExperiment as TrackingExperiment  # noqa: E402, PLC0414
from bourse.server.db.tracking_schema import TrackingLatest as TrackingLatest  # noqa: E402, PLC0414
from bourse.server.db.tracking_schema import TrackingMetric as TrackingMetric  # noqa: E402, PLC0414
from bourse.server.db.tracking_schema import TrackingParam as TrackingParam  # noqa: E402, PLC0414
from bourse.server.db.tracking_schema import TrackingRun as TrackingRun  # noqa: E402, PLC0414
from bourse.server.db.tracking_schema import TrackingTag as TrackingTag  # noqa: E402, PLC0414
