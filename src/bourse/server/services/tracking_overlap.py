"""Where a job's attempts overlap on its run's step axis: one point per (key, step).

Every attempt of a job writes the job's one run, and a resumed attempt (Lightning restores
``global_step`` from its checkpoint) continues its step axis. But an attempt that is stopped
(a notice, a burst, a failure) may have logged steps past the checkpoint the next attempt
resumes from — it trained on between its save and its exit, or its last save never finished
uploading and the next attempt resumed from the one before — and the next attempt logs those
steps again. So each point carries the attempt that wrote it (``writing_attempt``), and at a
(key, step) the newest attempt's points stand: a point of a later attempt replaces the points
earlier attempts stored at its step, and a point an earlier attempt sends after a later one
logged that step (a spool drained late) is dropped. One attempt's several points at one step
are all kept, as MLflow keeps them.

The usual batch costs one more indexed read: the stored points of other attempts in its step
ranges (none). A replacement deletes the earlier points, then mends what was made of them:
each key's count and latest point (``tracking_latest``) and the chart buckets of those steps
(``tracking_charts.rebuild_buckets``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import cast

from sqlalchemy import Table, and_, bindparam, delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.states import JobState
from bourse.protocol.mlflow import MetricIn as Point
from bourse.server.db.schema import Job, TrackingLatest, TrackingMetric, TrackingRun
from bourse.server.services.tracking_charts import rebuild_buckets

METRICS = cast(Table, TrackingMetric.__table__)
Stored = tuple[str, int, int]  # a stored point's key, step, and the attempt that wrote it
At = tuple[str, int]  # metric key, step
_KEY, _STEP = itemgetter(0), itemgetter(3)


@dataclass(frozen=True)
class Overlap:
    """What a batch does to the points stored at its steps."""

    kept: Sequence[Point]  # the batch's points that stand
    replaced: set[At] = field(default_factory=set)  # where earlier attempts' points go
    removed: Counter[str] = field(default_factory=Counter)  # how many go, per key


def writer_attempt(attempt: int, state: JobState) -> int:
    """The attempt a write to a job's run stands for: the job's current one, and one past its
    last once the job has ended (a local run going on after ``bourse burst --local``, or
    anyone logging to the run later)."""
    return attempt + 1 if state.terminal else attempt


def overlap(points: Sequence[Point], attempt: int, stored: Iterable[Stored]) -> Overlap:
    """The batch of ``attempt`` against the points other attempts stored at its steps."""
    older: Counter[At] = Counter()
    newer: set[At] = set()
    for key, step, by in stored:
        if by < attempt:
            older[key, step] += 1
        elif by > attempt:
            newer.add((key, step))
    if not older and not newer:
        return Overlap(points)
    kept = [p for p in points if (p.key, p.step) not in newer]
    replaced = {(p.key, p.step) for p in kept if (p.key, p.step) in older}
    removed: Counter[str] = Counter()
    for key, step in replaced:
        removed[key] += older[key, step]
    return Overlap(kept, replaced, removed)


def spans(points: Sequence[Point]) -> dict[str, tuple[int, int]]:
    """Each key's lowest and highest step in the batch."""
    keys = set(map(_KEY, points))
    if len(keys) == 1:  # the usual batch: one key's steps
        steps = list(map(_STEP, points))
        return {keys.pop(): (min(steps), max(steps))}
    found: dict[str, tuple[int, int]] = {}
    for p in points:
        low, high = found.get(p.key, (p.step, p.step))
        found[p.key] = (min(low, p.step), max(high, p.step))
    return found


# Statements of every batch, built once: building one costs more than SQLite takes to run it
_JOB_AT = select(Job.attempt, Job.state).join(TrackingRun, TrackingRun.job_id == Job.id).where(
    TrackingRun.id == bindparam("run"))
_OTHERS = select(TrackingMetric.key, TrackingMetric.step, TrackingMetric.attempt).where(
    TrackingMetric.run_id == bindparam("run"), TrackingMetric.attempt != bindparam("attempt"))
_ONE_KEY = _OTHERS.where(TrackingMetric.key == bindparam("key"),
                         TrackingMetric.step.between(bindparam("low"), bindparam("high")))


async def writing_attempt(session: AsyncSession, run_id: str) -> int:
    """``writer_attempt`` of the run's job; 0 for a run that is not a job's."""
    row = (await (await session.connection()).execute(_JOB_AT, {"run": run_id})).first()
    return 0 if row is None else writer_attempt(int(row.attempt), JobState(row.state))


async def overlap_of(session: AsyncSession, run_id: str, points: Sequence[Point],
                     attempt: int) -> Overlap:
    """``overlap`` with what is stored. Attempt 0 (no job, or a job not placed yet) meets no
    other attempt's points."""
    if attempt == 0:
        return Overlap(points)
    found = spans(points)
    params: dict[str, object] = {"run": run_id, "attempt": attempt}
    if len(found) == 1:  # the usual batch: one key's steps
        [(params["key"], (params["low"], params["high"]))] = found.items()
        statement = _ONE_KEY
    else:
        m = TrackingMetric
        statement = _OTHERS.where(or_(*(and_(m.key == key, m.step.between(low, high))
                                        for key, (low, high) in found.items())))
    rows = (await (await session.connection()).execute(statement, params)).all()
    return overlap(points, attempt, ((k, int(s), int(a)) for k, s, a in rows))


async def remove_replaced(session: AsyncSession, run_id: str, found: Overlap,
                          attempt: int) -> None:
    """Delete the earlier attempts' points where the batch replaces them."""
    if not found.replaced:
        return
    statement = delete(METRICS).where(
        METRICS.c.run_id == bindparam("r"), METRICS.c.key == bindparam("k"),
        METRICS.c.step == bindparam("s"), METRICS.c.attempt < bindparam("a"))
    await (await session.connection()).execute(statement, [
        {"r": run_id, "k": key, "s": step, "a": attempt} for key, step in found.replaced])


async def mend(session: AsyncSession, run_id: str, found: Overlap) -> None:
    """After a replacement (the batch's points stored): each key's count less the points
    removed, its latest point read again, and the buckets of the replaced steps rebuilt."""
    if not found.replaced:
        return
    connection = await session.connection()
    m, latest = TrackingMetric, TrackingLatest
    for key, removed in found.removed.items():
        top = (await connection.execute(select(m.value, m.step, m.timestamp).where(
            m.run_id == run_id, m.key == key).order_by(
            m.step.desc(), m.timestamp.desc(), m.seq.desc()).limit(1))).one()
        await connection.execute(update(latest).where(
            latest.run_id == run_id, latest.key == key).values(
            count=latest.count - removed, value=top.value, step=top.step,
            timestamp=top.timestamp))
    steps: dict[str, set[int]] = {}
    for key, step in found.replaced:
        steps.setdefault(key, set()).add(step)
    await rebuild_buckets(session, run_id, steps)
