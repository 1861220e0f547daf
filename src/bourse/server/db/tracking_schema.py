"""The tracking tables (issue 23): MLflow's experiments, runs, params, tags and metric
points, each key's latest point and the chart buckets (``services.tracking*``)."""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Float, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bourse.server.db.schema import Base


class TrackingExperiment(Base):
    """An MLflow experiment of a project (``services.tracking``): ``id`` "0" is the project's
    Default one, made when first used; a job's run joins its app's experiment or "0"."""

    __tablename__ = "tracking_experiments"
    project_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(500))
    lifecycle_stage: Mapped[str] = mapped_column(String(16), default="active")
    tags: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    __table_args__ = (UniqueConstraint("project_id", "name", name="uq_tracking_experiment_name"),)


class TrackingRun(Base):
    """A tracking run: a job's (``id`` is the job's id, every attempt writes to it) or one a
    client made. Times are MLflow's milliseconds."""

    __tablename__ = "tracking_runs"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[str] = mapped_column(String(64))
    experiment_id: Mapped[str] = mapped_column(String(40))
    name: Mapped[str] = mapped_column(String(250))
    status: Mapped[str] = mapped_column(String(16))  # RUNNING | SCHEDULED | FINISHED | ...
    lifecycle_stage: Mapped[str] = mapped_column(String(16), default="active")
    user_id: Mapped[str] = mapped_column(String(256), default="")
    start_time: Mapped[int] = mapped_column(BigInteger)
    end_time: Mapped[int | None] = mapped_column(BigInteger)
    job_id: Mapped[str | None] = mapped_column(String(40))  # the job it is, if any
    __table_args__ = (Index("ix_tracking_runs_experiment", "project_id", "experiment_id",
                            "start_time"),)


class TrackingParam(Base):
    """Written once: a second value for a key is refused (MLflow's INVALID_PARAMETER_VALUE)."""

    __tablename__ = "tracking_params"
    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(250), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class TrackingTag(Base):
    __tablename__ = "tracking_tags"
    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(250), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class TrackingMetric(Base):
    """Metric points, append-only but for a job's later attempt replacing an earlier one's
    points at a step. The key is the whole point, so a series is one range of the primary key
    (clustered on SQLite: WITHOUT ROWID) and a point sent twice is stored once. ``value``
    NULL is NaN (SQLite stores no NaN)."""

    __tablename__ = "tracking_metrics"
    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(250), primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    timestamp: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, default=0)  # same step+time
    value: Mapped[float | None] = mapped_column(Float)
    # the job's attempt that wrote it (0: not a job's run); see services.tracking_overlap
    attempt: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    __table_args__ = ({"sqlite_with_rowid": False},)


class TrackingLatest(Base):
    """Each run's latest point per metric key (MLflow's: the highest step, then the newest
    time), kept as points arrive; what search filters and orders on."""

    __tablename__ = "tracking_latest"
    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(250), primary_key=True)
    value: Mapped[float | None] = mapped_column(Float)
    step: Mapped[int] = mapped_column(BigInteger)
    timestamp: Mapped[int] = mapped_column(BigInteger)
    count: Mapped[int] = mapped_column(BigInteger, default=0)


class TrackingBucket(Base):
    """A metric's extremes per step bucket of width ``2**level`` (levels 6, 9, 12, 15, 18),
    kept as points arrive, so a chart of a long series reads a few thousand of these rows
    instead of every point (``services.tracking_charts``)."""

    __tablename__ = "tracking_buckets"
    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(250), primary_key=True)
    level: Mapped[int] = mapped_column(Integer, primary_key=True)
    bucket: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # step >> level
    min_step: Mapped[int] = mapped_column(BigInteger)
    max_step: Mapped[int] = mapped_column(BigInteger)
    min_value: Mapped[float] = mapped_column(Float)
    max_value: Mapped[float] = mapped_column(Float)
