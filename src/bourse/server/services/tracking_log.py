"""What a run is told: params (written once), tags (replaced), metric points (appended in
bulk), and each key's metric history.

Points are written with one executemany per batch (an insert that skips a point already
stored, so a batch sent twice by a retrying client is stored once), and each key's latest
point is kept in ``tracking_latest`` for search.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import InvalidInput
from bourse.server.db.schema import TrackingLatest, TrackingMetric, TrackingParam
from bourse.server.db.upsert import _insert
from bourse.server.services.tracking import Writer, set_tags, writable_run
from bourse.server.services.tracking_charts import add_buckets

PARAMS = cast(Table, TrackingParam.__table__)
MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100  # MLflow's limits per log-batch
MAX_PARAM_VALUE = 6000  # MLflow 2.x/3.x's param value length
MAX_KEY = 250


@dataclass(frozen=True)
class Point:
    key: str
    value: float
    timestamp: int
    step: int = 0


def check_batch(metrics: Sequence[Point], params: Mapping[str, str],
                tags: Mapping[str, str]) -> None:
    """MLflow's limits on one batch, with its wording."""
    for what, count, limit in (("metrics", len(metrics), MAX_METRICS),
                               ("params", len(params), MAX_PARAMS),
                               ("tags", len(tags), MAX_TAGS)):
        if count > limit:
            raise InvalidInput(f"A batch logging request can contain at most {limit} {what}. "
                               f"Got {count} {what}.", hint="split it into several batches")
    for key in [*(p.key for p in metrics), *params, *tags]:
        if not key or len(key) > MAX_KEY:
            raise InvalidInput(f"invalid key {key[:40]!r}: 1 to {MAX_KEY} characters")
    for key, value in params.items():
        if len(value) > MAX_PARAM_VALUE:
            raise InvalidInput(f"param {key!r} is {len(value)} characters long; at most "
                               f"{MAX_PARAM_VALUE}")


async def log_batch(session: AsyncSession, writer: Writer, run_id: str, *,
                    metrics: Sequence[Point], params: Mapping[str, str],
                    tags: Mapping[str, str], now: float) -> None:
    check_batch(metrics, params, tags)
    run = await writable_run(session, writer, run_id, now)
    if params:
        await _log_params(session, run.id, params)
    if tags:
        await set_tags(session, writer, run.id, tags)
    if metrics:
        await _log_points(session, run.id, metrics)


async def _log_params(session: AsyncSession, run_id: str, params: Mapping[str, str]) -> None:
    """Written once: the same value again is fine, another one is refused (MLflow's
    INVALID_PARAMETER_VALUE), before anything of the batch is written."""
    known = dict((await session.execute(select(TrackingParam.key, TrackingParam.value).where(
        TrackingParam.run_id == run_id, TrackingParam.key.in_(list(params))))).all())
    for key, value in params.items():
        if key in known and known[key] != value:
            raise InvalidInput(
                f"Changing param values is not allowed. Param with key='{key}' was already "
                f"logged with value='{known[key]}' for run ID='{run_id}'. Attempted logging "
                f"new value '{value}'.", hint="params are written once; log a new run")
    rows = [{"run_id": run_id, "key": k, "value": v} for k, v in params.items()
            if k not in known]
    if rows:
        await session.execute(_insert(session, PARAMS), rows)


def point_rows(run_id: str, points: Sequence[Point]) -> list[tuple[Any, ...]]:
    """The rows of a batch, in ``INSERT_COLUMNS`` order; points of one key at one step and
    time are told apart by ``seq`` (their order in the batch)."""
    seen: dict[tuple[str, int, int], int] = {}
    rows = []
    for p in points:
        at = (p.key, p.step, p.timestamp)
        seq = seen[at] = seen.get(at, -1) + 1
        rows.append((run_id, p.key, p.step, p.timestamp, seq,
                     None if p.value != p.value else p.value))  # NaN != NaN
    return rows


INSERT_COLUMNS = "run_id, key, step, timestamp, seq, value"
_INSERTS = {
    "sqlite": f"INSERT OR IGNORE INTO tracking_metrics ({INSERT_COLUMNS}) "
              "VALUES (?, ?, ?, ?, ?, ?)",
    "postgresql": f"INSERT INTO tracking_metrics ({INSERT_COLUMNS}) "
                  "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
}


async def insert_points(session: AsyncSession, rows: list[tuple[Any, ...]]) -> None:
    """One executemany on the driver: SQLAlchemy's per-row parameter processing cost more
    than SQLite takes to store the rows (benchmarks/tracking.py)."""
    connection = await session.connection()
    await connection.exec_driver_sql(_INSERTS[connection.dialect.name], rows)


async def _log_points(session: AsyncSession, run_id: str, points: Sequence[Point]) -> None:
    await insert_points(session, point_rows(run_id, points))
    await _update_latest(session, run_id, points)
    await add_buckets(session, run_id, points)


def _newest(points: Sequence[Point]) -> dict[str, tuple[Point, int]]:
    found: dict[str, tuple[Point, int]] = {}
    for p in points:
        best, count = found.get(p.key, (p, 0))
        if (p.step, p.timestamp) >= (best.step, best.timestamp):
            best = p
        found[p.key] = (best, count + 1)
    return found


async def _update_latest(session: AsyncSession, run_id: str, points: Sequence[Point]) -> None:
    newest = _newest(points)
    rows = {r.key: r for r in (await session.scalars(select(TrackingLatest).where(
        TrackingLatest.run_id == run_id, TrackingLatest.key.in_(list(newest))))).all()}
    for key, (p, count) in newest.items():
        value = None if math.isnan(p.value) else p.value
        row = rows.get(key)
        if row is None:
            session.add(TrackingLatest(run_id=run_id, key=key, value=value, step=p.step,
                                       timestamp=p.timestamp, count=count))
            continue
        row.count += count
        if (p.step, p.timestamp) >= (row.step, row.timestamp):
            row.value, row.step, row.timestamp = value, p.step, p.timestamp


async def history(session: AsyncSession, run_id: str, key: str, *, after: tuple[int, int, int]
                  | None = None, limit: int = 25_000) -> list[TrackingMetric]:
    """A key's points in step order (then time), ``limit`` at most, after a page's last."""
    query = select(TrackingMetric).where(TrackingMetric.run_id == run_id,
                                         TrackingMetric.key == key)
    if after is not None:
        query = query.where(tuple_(TrackingMetric.step, TrackingMetric.timestamp,
                                   TrackingMetric.seq) > after)
    query = query.order_by(TrackingMetric.step, TrackingMetric.timestamp, TrackingMetric.seq)
    return list(await session.scalars(query.limit(limit)))


def json_float(value: float | None) -> float | str:
    """A value as protobuf's JSON writes doubles: NaN and infinities as strings."""
    if value is None or math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def metric_dict(key: str, value: float | None, timestamp: int, step: int) -> dict[str, Any]:
    return {"key": key, "value": json_float(value), "timestamp": timestamp, "step": step}
