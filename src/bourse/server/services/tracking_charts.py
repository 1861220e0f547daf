"""Metric curves for charts, downsampled on the server, and what a run's job cost and used.

A series with few points is read whole and thinned by LTTB (``core.lttb``). A long one is
first reduced in SQL to each of ``4 × points`` step buckets' lowest and highest value (two
points per bucket, at the bucket's first and last step: at chart resolution a bucket is less
than a pixel wide), so a 1,000,000-point series costs one aggregate over its index range, not
a million rows in Python; LTTB then picks ``points`` of those.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Integer, cast, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.lttb import lttb
from bourse.server.db.schema import TrackingLatest, TrackingMetric

WHOLE_FACTOR = 4  # a series of up to 4 × points points is read whole


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
        found = [(float(s), float(v)) for s, v in rows]
    else:
        found = await _bucketed(session, run_id, key, points * WHOLE_FACTOR)
    return Series(run_id, key, int(total), lttb(found, points))


async def _bucketed(session: AsyncSession, run_id: str, key: str,
                    buckets: int) -> list[tuple[float, float]]:
    where = (TrackingMetric.run_id == run_id, TrackingMetric.key == key)
    low, high = (await session.execute(select(func.min(TrackingMetric.step),
                                              func.max(TrackingMetric.step)).where(
        *where))).one()
    if low is None:
        return []
    span = int(high) - int(low) + 1
    bucket = cast((TrackingMetric.step - int(low)) * buckets / span, Integer).label("b")
    rows = (await session.execute(select(
        bucket, func.min(TrackingMetric.step), func.max(TrackingMetric.step),
        func.min(TrackingMetric.value), func.max(TrackingMetric.value)).where(
        *where, TrackingMetric.value.is_not(None)).group_by(bucket).order_by(bucket))).all()
    found: list[tuple[float, float]] = []
    for _, first, last, lowest, highest in rows:
        found.append((float(first), float(lowest)))
        if last != first or highest != lowest:
            found.append((float(last), float(highest)))
    return found


async def compare(session: AsyncSession, run_ids: Sequence[str], keys: Sequence[str],
                  points: int) -> list[Series]:
    return [await series(session, r, k, points) for r in run_ids for k in keys]
