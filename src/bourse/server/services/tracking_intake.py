"""Tracking records a job sent through its agent's spool (``track`` messages), into its run.

A record is de-duplicated by (job, attempt, rank, seq): the agent sends an attempt's messages
in seq order and the coordinator applies them in that order, so the highest seq applied per
attempt and rank — kept in the run's reserved tag ``bourse.track.seq.<attempt>.<rank>``, in the
same transaction as the points — tells a replay from news. Every attempt writes the job's one
run, so a resumed attempt continues its step axis; the record's attempt is its points'
(``tracking_overlap``: a later attempt's points at a step replace an earlier one's). Only
attempts that ran on the sending node are heard. A record the run refuses (a param written
again with another value, a deleted run) is dropped and logged: the agent has acknowledged
nothing it could send better.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import BourseError
from bourse.protocol.track import TrackBatch
from bourse.server.access import Scope
from bourse.server.db.schema import Job, TrackingTag
from bourse.server.services.agents import load_attempts
from bourse.server.services.tracking import Writer
from bourse.server.services.tracking_log import Point, log_batch

log = logging.getLogger(__name__)
SEQ_TAG = "bourse.track.seq"


def seq_tag(attempt: int, rank: int) -> str:
    return f"{SEQ_TAG}.{attempt}.{rank}"


def points(batch: TrackBatch) -> list[Point]:
    return [Point(key=key, value=math.nan if value is None else value, timestamp=ts, step=step)
            for key, value, step, ts in batch.metrics]


async def record_tracks(session: AsyncSession, node_id: str, batches: Sequence[TrackBatch],
                        now: float) -> int:
    """Write the new records of attempts of this node into their jobs' runs; returns how
    many were new."""
    attempts = await load_attempts(session, {(b.job_id, b.attempt) for b in batches}, node_id)
    jobs = {j.id: j for j in (await session.scalars(select(Job).where(
        Job.id.in_({job for job, _ in attempts})))).all()}
    high: dict[tuple[str, str], int] = {}
    written = 0
    for batch in batches:
        attempt = attempts.get((batch.job_id, batch.attempt))
        if attempt is None:
            continue
        at = (batch.job_id, seq_tag(batch.attempt, attempt.rank))
        if at not in high:
            high[at] = await _stored_high(session, *at)
        if batch.seq <= high[at]:
            continue
        job = jobs[batch.job_id]
        try:
            await log_batch(session, Writer(job.project_id, Scope(job.project_id), job.id),
                            job.id, metrics=points(batch), params=batch.params,
                            tags=batch.tags, now=now, attempt=batch.attempt)
        except BourseError as exc:
            log.warning("job %s attempt %s: tracking record %s refused: %s", batch.job_id,
                        batch.attempt, batch.seq, exc)
        high[at] = batch.seq
        written += 1
    for (job_id, key), seq in high.items():
        await _store_high(session, job_id, key, seq)
    return written


async def _stored_high(session: AsyncSession, run_id: str, key: str) -> int:
    tag = await session.get(TrackingTag, (run_id, key))
    return int(tag.value) if tag is not None else -1


async def _store_high(session: AsyncSession, run_id: str, key: str, seq: int) -> None:
    tag = await session.get(TrackingTag, (run_id, key))
    if tag is None:
        session.add(TrackingTag(run_id=run_id, key=key, value=str(seq)))
    elif int(tag.value) < seq:
        tag.value = str(seq)
