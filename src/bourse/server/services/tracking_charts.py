"""Metric curves for charts, downsampled on the server.

A series with few points is read whole and thinned by LTTB (``core.lttb``). For a long one,
the extremes of each step bucket are kept as points arrive (``tracking_buckets``: buckets of
``2**level`` steps at a few levels; a batch of 1,000 consecutive steps touches about twenty
rows); a chart reads the finest level with at most ``4 × points`` buckets, merged in the
database to at most ``points / 2``, and draws two points per bucket — its lowest value at its
first step and its highest at its last (at chart resolution a bucket is narrower than a few
pixels): the envelope of the curve, its peaks and dips kept, in at most ``points`` points
with no LTTB pass over them (which cost a chart of ten long series more than its reads). A
1,000,000-point series costs a thousand small rows, not a million.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby, pairwise
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import Executable, Table, delete, func, literal_column, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

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
    """The hot loop of an ingest, its comparisons inline; consecutive points mostly fall in
    the bucket of the one before, which is then not looked up again."""
    found: dict[Key, list[float]] = {}
    first = LEVELS[0]
    key, bucket, row = None, -1, [0.0, 0.0, 0.0, 0.0]
    for p in points:
        value, step = p.value, p.step
        if value != value:  # noqa: PLR0124 -- NaN: no extremes
            continue
        if step >> first != bucket or p.key != key:
            key, bucket = p.key, step >> first
            at = (key, first, bucket)
            if at not in found:
                row = found[at] = [step, step, value, value]
                continue
            row = found[at]
        if step < row[0]:
            row[0] = step
        elif step > row[1]:
            row[1] = step
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


BUCKET_COLUMNS = "run_id, key, level, bucket, min_step, max_step, min_value, max_value"
_MERGE = ("ON CONFLICT (run_id, key, level, bucket) DO UPDATE SET "
          "min_step = {low}({t}min_step, excluded.min_step), "
          "max_step = {high}({t}max_step, excluded.max_step), "
          "min_value = {low}({t}min_value, excluded.min_value), "
          "max_value = {high}({t}max_value, excluded.max_value)")
_UPSERTS = {
    "sqlite": f"INSERT INTO tracking_buckets ({BUCKET_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
              + _MERGE.format(low="min", high="max", t=""),
    "postgresql": f"INSERT INTO tracking_buckets ({BUCKET_COLUMNS}) "
                  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
                  + _MERGE.format(low="least", high="greatest", t="tracking_buckets."),
}


async def add_buckets(session: AsyncSession, run_id: str, points: Sequence[Any]) -> None:
    """Merge a batch into the stored buckets (min and max: a batch sent twice changes
    nothing); one executemany on the driver, as the points."""
    rows = bucket_rows(run_id, points)
    if not rows:
        return
    connection = await session.connection()
    await connection.exec_driver_sql(_UPSERTS[connection.dialect.name],
                                     [tuple(r.values()) for r in rows])


async def rebuild_buckets(session: AsyncSession, run_id: str,
                          steps: Mapping[str, Iterable[int]]) -> None:
    """Recompute the buckets that hold ``steps`` from what is stored now: points there were
    replaced (``tracking_overlap``), and a bucket keeps only extremes, which may have been
    theirs. The finest level from the points, each coarser one from the eight finer buckets
    it holds; a bucket left without a value (NaN points only) goes."""
    connection = await session.connection()
    m, b = TrackingMetric, TrackingBucket
    for key, found in steps.items():
        buckets = {step >> LEVELS[0] for step in found}
        for bucket in buckets:
            low = bucket << LEVELS[0]
            await _replace(connection, (run_id, key, LEVELS[0], bucket), select(
                func.min(m.step), func.max(m.step), func.min(m.value), func.max(m.value)).where(
                m.run_id == run_id, m.key == key, m.step >= low,
                m.step < low + (1 << LEVELS[0]), m.value.is_not(None)))
        for finer, level in pairwise(LEVELS):
            width = level - finer
            buckets = {bucket >> width for bucket in buckets}
            for bucket in buckets:
                await _replace(connection, (run_id, key, level, bucket), select(
                    func.min(b.min_step), func.max(b.max_step), func.min(b.min_value),
                    func.max(b.max_value)).where(
                    b.run_id == run_id, b.key == key, b.level == finer,
                    b.bucket >= bucket << width, b.bucket < (bucket + 1) << width))


async def _replace(connection: AsyncConnection, at: tuple[str, str, int, int],
                   extremes: Executable) -> None:
    """The bucket ``at`` (run, key, level, bucket) made again from ``extremes``."""
    row = (await connection.execute(extremes)).one()
    run_id, key, level, bucket = at
    await connection.execute(delete(BUCKETS).where(
        BUCKETS.c.run_id == run_id, BUCKETS.c.key == key, BUCKETS.c.level == level,
        BUCKETS.c.bucket == bucket))
    if row[0] is not None:
        await connection.execute(BUCKETS.insert().values(
            run_id=run_id, key=key, level=level, bucket=bucket, min_step=row[0],
            max_step=row[1], min_value=row[2], max_value=row[3]))


@dataclass(frozen=True)
class Series:
    run_id: str
    key: str
    total: int  # points stored
    points: list[tuple[float, float]]  # (step, value), NaN points left out


async def series(session: AsyncSession, run_id: str, key: str, points: int) -> Series:
    return (await compare(session, [run_id], [key], points))[0]


async def compare(session: AsyncSession, run_ids: Sequence[str], keys: Sequence[str],
                  points: int) -> list[Series]:
    """Each (run, key)'s series, runs outer; a few statements for all of them (the counts,
    the spans, the buckets of each level read), not a few per series."""
    connection = await session.connection()  # plain rows: no ORM objects
    pairs = [(r, k) for r in run_ids for k in keys]
    totals = {(r, k): int(c) for r, k, c in (await connection.execute(select(
        TrackingLatest.run_id, TrackingLatest.key, TrackingLatest.count).where(
        TrackingLatest.run_id.in_(run_ids), TrackingLatest.key.in_(keys)))).all()}
    long = [p for p in pairs if totals.get(p, 0) > points * WHOLE_FACTOR]
    found = await _bucketed(session, long, points) if long else {}
    for pair in pairs:
        if pair not in found:
            found[pair] = await _whole(session, *pair)
    return [Series(r, k, totals.get((r, k), 0), lttb(found[(r, k)], points)) for r, k in pairs]


async def _whole(session: AsyncSession, run_id: str, key: str) -> list[tuple[float, float]]:
    rows = (await (await session.connection()).execute(select(
        TrackingMetric.step, TrackingMetric.value).where(
        TrackingMetric.run_id == run_id, TrackingMetric.key == key,
        TrackingMetric.value.is_not(None)).order_by(TrackingMetric.step,
                                                    TrackingMetric.timestamp))).all()
    return [(float(s), float(v)) for s, v in rows if v is not None]


Pair = tuple[str, str]  # run id, metric key
_PAIR = itemgetter(0, 1)


async def _bucketed(session: AsyncSession, pairs: Sequence[Pair],
                    points: int) -> dict[Pair, list[tuple[float, float]]]:
    """The points of long series: each one's finest level with at most ``4 × points``
    buckets, merged in the database to at most ``points / 2`` (two points each); one
    statement for the spans, one per (level, merge)."""
    connection = await session.connection()
    run_ids, keys = sorted({r for r, _ in pairs}), sorted({k for _, k in pairs})
    where = (TrackingBucket.run_id.in_(run_ids), TrackingBucket.key.in_(keys))
    spans = (await connection.execute(select(
        TrackingBucket.run_id, TrackingBucket.key, func.min(TrackingBucket.min_step),
        func.max(TrackingBucket.max_step)).where(*where, TrackingBucket.level == LEVELS[-1])
        .group_by(TrackingBucket.run_id, TrackingBucket.key))).all()  # a few rows each
    reads: dict[tuple[int, int], set[Pair]] = {}
    for run_id, key, low, high in spans:
        reads.setdefault(read_plan(int(high) - int(low) + 1, points), set()).add((run_id, key))
    found: dict[Pair, list[tuple[float, float]]] = {p: [] for p in pairs}
    for (level, shift), wanted in reads.items():
        group = TrackingBucket.bucket.op(">>")(literal_column(str(int(shift))))  # int4
        rows = (await connection.execute(select(
            TrackingBucket.run_id, TrackingBucket.key, func.min(TrackingBucket.min_step),
            func.max(TrackingBucket.max_step), func.min(TrackingBucket.min_value),
            func.max(TrackingBucket.max_value)).where(*where, TrackingBucket.level == level)
            .group_by(TrackingBucket.run_id, TrackingBucket.key, group)
            .order_by(TrackingBucket.run_id, TrackingBucket.key, group))).all()
        for pair, series in groupby(rows, key=_PAIR):  # in (run, key) order
            if pair in wanted:
                _candidates(found[pair], [row[2:] for row in series])
    return found


def read_plan(span: int, points: int) -> tuple[int, int]:
    """The level a series of ``span`` steps is read at (its finest with at most
    ``4 × points`` buckets) and how many bits of the bucket number are merged away there
    (buckets ``b >> shift`` are one), so that at most ``points / 2`` are left."""
    level = next((lv for lv in LEVELS if span >> lv <= points * WHOLE_FACTOR), LEVELS[-1])
    shift = 0
    while (span >> level) >> shift >= points // 2:
        shift += 1
    return level, shift


Bucket = tuple[int, int, float, float]  # first step, last step, lowest, highest


def _candidates(into: list[tuple[float, float]], buckets: list[Bucket]) -> None:
    """Each bucket's two extremes at its first and last step, in the order the curve runs: a
    bucket lower than its neighbour before it (the first: than the one after) has its
    highest first, so a falling curve is not drawn rising inside each bucket. Which extreme
    came first is not kept; the trend decides."""
    mids = [(low + high) / 2 for _, _, low, high in buckets]
    falls = [len(mids) > 1 and mids[1] < mids[0], *(a > b for a, b in pairwise(mids))]
    add = into.append
    for (first, last, lowest, highest), falling in zip(buckets, falls, strict=True):
        if falling:
            add((float(first), highest))
            if last != first or highest != lowest:
                add((float(last), lowest))
        else:
            add((float(first), lowest))
            if last != first or highest != lowest:
                add((float(last), highest))
