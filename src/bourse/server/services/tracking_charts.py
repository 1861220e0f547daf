"""Metric curves for charts, downsampled on the server.

A series with few points is read whole and thinned by LTTB (``core.lttb``). For a long one,
the extremes of each step bucket are kept as points arrive (``tracking_buckets``: buckets of
``2**level`` steps at a few levels; a batch of 1,000 consecutive steps touches about twenty
rows); a chart reads the finest level with at most ``4 × points`` buckets — two candidate
points per bucket, its lowest value at its first step and its highest at its last (at chart
resolution a bucket is narrower than a pixel) — and LTTB picks ``points`` of those. A
1,000,000-point series costs a thousand small rows, not a million.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.lttb import lttb
from bourse.server.db.schema import TrackingBucket, TrackingLatest, TrackingMetric

WHOLE_FACTOR = 4  # a series of up to 4 × points points is read whole
LEVELS = (6, 9, 12, 15, 18)  # bucket widths 64 ... 262,144 steps
BUCKETS = cast(Table, TrackingBucket.__table__)
Key = tuple[str, int, int]  # metric key, level, bucket


def bucket_rows(run_id: str, points: Sequence[Any]) -> list[dict[str, Any]]:
    """A batch's extremes per (key, level, bucket); NaN points have none. Pure: one pass
    over the points for the finest level, the coarser ones from its buckets."""
    finest = _finest(points)
    found = dict(finest)
    for (key, _, bucket), row in finest.items():
        for level in LEVELS[1:]:
            at = (key, level, bucket >> (level - LEVELS[0]))
            if at in found:
                _merge(found[at], row)
            else:
                found[at] = list(row)
    return [{"run_id": run_id, "key": k, "level": level, "bucket": b, "min_step": int(r[0]),
             "max_step": int(r[1]), "min_value": r[2], "max_value": r[3]}
            for (k, level, b), r in found.items()]


def _finest(points: Sequence[Any]) -> dict[Key, list[float]]:
    """The hot loop of an ingest, its comparisons inline."""
    found: dict[Key, list[float]] = {}
    first = LEVELS[0]
    for p in points:
        value, step = p.value, p.step
        if math.isnan(value):
            continue
        at = (p.key, first, step >> first)
        row = found.get(at)
        if row is None:
            found[at] = [step, step, value, value]
            continue
        row[0], row[1] = min(row[0], step), max(row[1], step)
        if value < row[2]:
            row[2] = value
        elif value > row[3]:
            row[3] = value
    return found


def _merge(into: list[float], row: list[float]) -> None:
    into[0] = min(into[0], row[0])
    into[1] = max(into[1], row[1])
    into[2] = min(into[2], row[2])
    into[3] = max(into[3], row[3])


async def add_buckets(session: AsyncSession, run_id: str, points: Sequence[Any]) -> None:
    """Merge a batch into the stored buckets (min and max: a batch sent twice changes
    nothing)."""
    rows = bucket_rows(run_id, points)
    if not rows:
        return
    postgres = session.get_bind().dialect.name == "postgresql"
    statement = (postgresql.insert(BUCKETS) if postgres else sqlite.insert(BUCKETS))
    low, high = (func.least, func.greatest) if postgres else (func.min, func.max)
    new = statement.excluded
    await session.execute(statement.on_conflict_do_update(
        index_elements=["run_id", "key", "level", "bucket"],
        set_={"min_step": low(BUCKETS.c.min_step, new.min_step),
              "max_step": high(BUCKETS.c.max_step, new.max_step),
              "min_value": low(BUCKETS.c.min_value, new.min_value),
              "max_value": high(BUCKETS.c.max_value, new.max_value)}), rows)


@dataclass(frozen=True)
class Series:
    run_id: str
    key: str
    total: int  # points stored
    points: list[tuple[float, float]]  # (step, value), NaN points left out


async def series(session: AsyncSession, run_id: str, key: str, points: int) -> Series:
    total = await session.scalar(select(TrackingLatest.count).where(
        TrackingLatest.run_id == run_id, TrackingLatest.key == key)) or 0
    if total <= points * WHOLE_FACTOR:
        rows = (await session.execute(select(TrackingMetric.step, TrackingMetric.value).where(
            TrackingMetric.run_id == run_id, TrackingMetric.key == key,
            TrackingMetric.value.is_not(None)).order_by(TrackingMetric.step,
                                                        TrackingMetric.timestamp))).all()
        found = [(float(s), float(v)) for s, v in rows if v is not None]
    else:
        found = await _bucketed(session, run_id, key, points * WHOLE_FACTOR)
    return Series(run_id, key, int(total), lttb(found, points))


async def _bucketed(session: AsyncSession, run_id: str, key: str,
                    buckets: int) -> list[tuple[float, float]]:
    where = (TrackingBucket.run_id == run_id, TrackingBucket.key == key)
    low, high = (await session.execute(select(func.min(TrackingBucket.min_step),
                                              func.max(TrackingBucket.max_step)).where(
        *where, TrackingBucket.level == LEVELS[-1]))).one()  # a few rows
    if low is None:
        return []
    span = int(high) - int(low) + 1
    level = next((lv for lv in LEVELS if span >> lv <= buckets), LEVELS[-1])
    rows = (await (await session.connection()).execute(select(  # plain rows: no ORM
        TrackingBucket.min_step, TrackingBucket.max_step, TrackingBucket.min_value,
        TrackingBucket.max_value).where(*where, TrackingBucket.level == level)
        .order_by(TrackingBucket.bucket))).all()
    found: list[tuple[float, float]] = []
    for first, last, lowest, highest in rows:
        found.append((float(first), float(lowest)))
        if last != first or highest != lowest:
            found.append((float(last), float(highest)))
    return found


async def compare(session: AsyncSession, run_ids: Sequence[str], keys: Sequence[str],
                  points: int) -> list[Series]:
    return [await series(session, r, k, points) for r in run_ids for k in keys]
