"""Resource samples: storing what agents send, judging stalls and full disks, serving series,
and the rollup that keeps storage bounded (raw for a few hours, then minute means).

Samples carry the agent's clock, as log chunks do, so "printed nothing for 5 minutes" compares
two times from the same clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, and_, delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.health import (
    Reading,
    Stall,
    assess,
    disk_message,
    filling_disks,
)
from bourse.core.states import AttemptState, JobState
from bourse.protocol.agent import Metrics
from bourse.protocol.metrics import JobSample, Sample, SampleView
from bourse.server.config import MetricsConfig
from bourse.server.db.schema import Attempt, Job, LogChunk, MetricSample
from bourse.server.metrics import rollup
from bourse.server.services.agents import load_attempts, load_jobs
from bourse.server.services.jobs import stalled_in
from bourse.server.services.lifecycle import add_event

SAMPLES = cast(Table, MetricSample.__table__)
ROLLUP_BATCH = 20_000
Disk = tuple[str, int, int]
Key = tuple[str, int]  # job, attempt


async def record_metrics(session: AsyncSession, node_id: str, messages: Sequence[Metrics],
                         config: MetricsConfig, now: float) -> bool:
    """Store one node's samples and act on them; True when a job's timeline changed."""
    samples = await _current(session, node_id, [s for m in messages for s in m.jobs])
    nodes = [m.node for m in messages if m.node is not None]
    changed = await _disk_warnings(session, node_id, nodes, config.disk_warn_fraction, now)
    rows = [_row(node_id, s, s.job_id, s.attempt) for s in samples]
    rows += [_row(node_id, s, None, None) for s in nodes]
    if rows:
        await session.execute(insert(SAMPLES), rows)
    if samples:
        changed |= await _judge_all(session, samples, config, now)
    return changed


def _row(node_id: str, sample: Sample, job_id: str | None,
         attempt: int | None) -> dict[str, Any]:
    data = sample.model_dump(mode="json", exclude={"job_id", "attempt", "time"})
    return {"node_id": node_id, "job_id": job_id, "attempt": attempt, "time": sample.time,
            "period_s": 0.0, "cpu_percent": sample.cpu_percent,
            "gpu_percent": rollup.gpu_percent(data), "data": data}


async def _current(session: AsyncSession, node_id: str,
                   samples: list[JobSample]) -> list[JobSample]:
    """The samples of attempts this node runs (a stale attempt's are dropped)."""
    attempts = await load_attempts(session, {(s.job_id, s.attempt) for s in samples}, node_id)
    active = {key for key, a in attempts.items() if AttemptState(a.state).active}
    return [s for s in samples if (s.job_id, s.attempt) in active]


async def _judge_all(session: AsyncSession, samples: list[JobSample], config: MetricsConfig,
                     now: float) -> bool:
    """Flag or clear the stall of every running job sampled here; True when a timeline
    changed. A few statements for the whole message, whatever the number of jobs."""
    latest: dict[Key, float] = {}
    for s in samples:
        latest[(s.job_id, s.attempt)] = max(s.time, latest.get((s.job_id, s.attempt), 0.0))
    jobs = await load_jobs(session, {job for job, _ in latest})
    running = {key: t for key, t in latest.items() if _runs(jobs.get(key[0]), key[1])}
    if not running:
        return False
    window = config.stall.after_s
    readings = await _windows(session, running, window)
    outputs = await _last_outputs(session, list(running))
    changed = False
    for key in sorted(running):
        stall = assess(readings.get(key, []), outputs.get(key), config.stall)
        changed |= _apply_stall(session, jobs[key[0]], stall, now)
    return changed


def _runs(job: Job | None, attempt: int) -> bool:
    return job is not None and job.attempt == attempt and job.state == JobState.RUNNING.value


def _apply_stall(session: AsyncSession, job: Job, stall: Stall | None, now: float) -> bool:
    flagged = stalled_in(job)
    if stall is not None and flagged is None:
        job.stalled = {**stall.as_dict(), "attempt": job.attempt}
        add_event(session, job.id, job.attempt, "stalled", now,
                  message=f"stalled: {stall.message}", data=stall.as_dict())
        return True
    if stall is None and flagged is not None:
        job.stalled = None
        add_event(session, job.id, job.attempt, "active", now, message=(
            "active again: " + ("its GPUs are busy" if flagged.get("kind") == "gpu_idle"
                                else "it prints or computes")))
        return True
    return False


async def _windows(session: AsyncSession, latest: dict[Key, float],
                   window_s: float) -> dict[Key, list[Reading]]:
    """Each job's raw samples of its last ``window_s`` seconds, plus its newest one before
    them (which tells whether it has been watched that long): two statements in all."""
    since = min(latest.values()) - window_s
    ids = list({job for job, _ in latest})
    raw = (MetricSample.job_id.in_(ids), MetricSample.period_s == 0)
    rows = (await session.execute(select(
        MetricSample.job_id, MetricSample.attempt, MetricSample.time, MetricSample.cpu_percent,
        MetricSample.gpu_percent).where(*raw, MetricSample.time >= since))).all()
    before = (await session.execute(select(
        MetricSample.job_id, MetricSample.attempt, func.max(MetricSample.time)).where(
        *raw, MetricSample.time < since).group_by(MetricSample.job_id,
                                                  MetricSample.attempt))).all()
    found: dict[Key, list[Reading]] = {}
    for job_id, attempt, time, cpu, gpu in rows:
        key = (job_id, attempt)
        if key in latest and time >= latest[key] - window_s * 2:
            found.setdefault(key, []).append(Reading(time, cpu, () if gpu is None else (gpu,)))
    for job_id, attempt, time in before:
        key = (str(job_id), int(attempt or 0))
        if key in latest and time is not None:
            found.setdefault(key, []).append(Reading(time, None))
    return found


async def _last_outputs(session: AsyncSession, keys: list[Key]) -> dict[Key, float]:
    """When each attempt last printed: its newest log chunk's time (an index seek per job)."""
    newest = (select(LogChunk.time).where(LogChunk.job_id == Job.id,
                                          LogChunk.attempt == Job.attempt)
              .order_by(LogChunk.id.desc()).limit(1).scalar_subquery())
    rows = (await session.execute(select(Job.id, Job.attempt, newest).where(
        Job.id.in_([job for job, _ in keys])))).all()
    return {(job_id, attempt): time for job_id, attempt, time in rows if time is not None}


async def _disk_warnings(session: AsyncSession, node_id: str, samples: list[Sample],
                         fraction: float, now: float) -> bool:
    """Warn the node's running jobs when a disk of the node crosses ``fraction``."""
    if not samples:
        return False
    previous = await _last_node_disks(session, node_id)
    warnings: list[Disk] = []
    for sample in sorted(samples, key=lambda s: s.time):
        current = [(d.label, d.used_bytes, d.total_bytes) for d in sample.disks]
        warnings += filling_disks(previous, current, fraction)
        previous = current
    if not warnings:
        return False
    running = (await session.execute(select(Attempt.job_id, Attempt.number).where(
        Attempt.node_id == node_id, Attempt.state == AttemptState.RUNNING.value))).all()
    for job_id, number in running:
        for disk in warnings:
            add_event(session, job_id, number, "warning", now,
                      message=disk_message(disk), data={"disk": disk[0], "used": disk[1],
                                                        "total": disk[2]})
    return bool(running)


async def _last_node_disks(session: AsyncSession, node_id: str) -> list[Disk]:
    data = await session.scalar(select(MetricSample.data).where(
        MetricSample.node_id == node_id, MetricSample.job_id.is_(None))
        .order_by(MetricSample.time.desc()).limit(1))
    disks = (data or {}).get("disks") or ()
    return [(d["label"], int(d["used_bytes"]), int(d["total_bytes"])) for d in disks]


# --- reading ----------------------------------------------------------------------------------

_MEMBER = and_(Attempt.job_id == MetricSample.job_id, Attempt.number == MetricSample.attempt,
               Attempt.node_id == MetricSample.node_id)  # the gang member a sample is of


async def job_metrics(session: AsyncSession, job_id: str, since: float,
                      limit: int, rank: int | None = None) -> list[SampleView]:
    """The job's newest ``limit`` samples from ``since`` on, oldest first, each with the rank
    of the member it is of (a gang's members run on nodes of their own); ``rank``: one
    member's only."""
    query = (select(MetricSample, Attempt.rank).outerjoin(Attempt, _MEMBER)
             .where(MetricSample.job_id == job_id, MetricSample.time >= since))
    if rank is not None:
        query = query.where(Attempt.rank == rank)
    rows = (await session.execute(query.order_by(MetricSample.time.desc())
                                  .limit(limit))).all()
    return [SampleView(**r.data, time=r.time, period_s=r.period_s, attempt=r.attempt,
                       rank=member) for r, member in reversed(rows)]


async def node_metrics(session: AsyncSession, node_id: str, since: float,
                       limit: int) -> list[SampleView]:
    return await _series(session, (MetricSample.node_id == node_id)
                         & MetricSample.job_id.is_(None), since, limit)


async def _series(session: AsyncSession, where: Any, since: float,
                  limit: int) -> list[SampleView]:
    rows = (await session.scalars(select(MetricSample).where(where, MetricSample.time >= since)
                                  .order_by(MetricSample.time.desc()).limit(limit))).all()
    return [SampleView(**r.data, time=r.time, period_s=r.period_s, attempt=r.attempt)
            for r in reversed(rows)]


async def latest_node_samples(session: AsyncSession,
                              node_ids: Sequence[str]) -> dict[str, SampleView]:
    """Each node's newest sample (the nodes page's utilisation)."""
    found: dict[str, SampleView] = {}
    for node_id in node_ids:
        samples = await node_metrics(session, node_id, 0.0, 1)
        if samples:
            found[node_id] = samples[0]
    return found


# --- rollup -----------------------------------------------------------------------------------

async def compact_metrics(session: AsyncSession, now: float, config: MetricsConfig) -> int:
    """Roll raw samples older than the raw retention into minute means, and delete means
    older than the retention. Returns how many raw samples were rolled up (one batch)."""
    cutoff = rollup.bucket(now - config.raw_retention_s)
    rows = (await session.scalars(select(MetricSample).where(
        MetricSample.period_s == 0, MetricSample.time < cutoff)
        .order_by(MetricSample.time).limit(ROLLUP_BATCH))).all()
    raw = [rollup.Row(r.node_id, r.job_id, r.attempt, r.time, r.data) for r in rows]
    until = rollup.complete_before(raw, cutoff, len(rows) < ROLLUP_BATCH)
    taken = [r for r in raw if r.time < until]
    means = rollup.downsample(taken)
    if means:
        await session.execute(insert(SAMPLES), [_mean_row(m) for m in means])
    await session.execute(delete(MetricSample).where(
        MetricSample.period_s == 0, MetricSample.time < until))
    await session.execute(delete(MetricSample).where(
        MetricSample.period_s > 0, MetricSample.time < now - config.retention_s))
    return len(taken)


def _mean_row(row: rollup.Row) -> dict[str, Any]:
    return {"node_id": row.node_id, "job_id": row.job_id, "attempt": row.attempt,
            "time": row.time, "period_s": rollup.PERIOD_S,
            "cpu_percent": row.data.get("cpu_percent"),
            "gpu_percent": rollup.gpu_percent(row.data), "data": row.data}
