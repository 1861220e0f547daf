"""What a run is told: params (written once), tags (replaced), metric points (appended in
bulk), and each key's metric history.

Points are written with one executemany per batch (an insert that skips a point already
stored, so a batch sent twice by a retrying client is stored once), and each key's latest
point is kept in ``tracking_latest`` for search, by one upsert per key. Each point carries the
job's attempt that wrote it, and in a job's run a later attempt's points at a step replace the
earlier attempts' (``tracking_overlap``: one point per step across the job's moves). The
per-point work is done by C loops (``map``, ``itemgetter``, ``max``) where it can be: at 1,000
points a batch, a Python statement per point costs as much as SQLite takes to store it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import add, itemgetter
from typing import Any, cast

from sqlalchemy import Table, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import InvalidInput
from bourse.protocol.mlflow import MetricIn
from bourse.server.db.schema import TrackingMetric, TrackingParam
from bourse.server.db.upsert import _insert
from bourse.server.services.tracking import Writer, set_tags, writable_run_id
from bourse.server.services.tracking_charts import add_buckets
from bourse.server.services.tracking_overlap import (
    mend,
    overlap_of,
    remove_replaced,
    writing_attempt,
)

PARAMS = cast(Table, TrackingParam.__table__)
MAX_METRICS, MAX_PARAMS, MAX_TAGS = 1000, 100, 100  # MLflow's limits per log-batch
MAX_PARAM_VALUE = 6000  # MLflow 2.x/3.x's param value length
MAX_KEY = 250
# A metric point: (key, value, timestamp, step), the tuple pydantic validates a batch into
Point = MetricIn
_KEY, _VALUE, _AT, _WHEN = itemgetter(0), itemgetter(1), itemgetter(0, 3, 2), itemgetter(3, 2)


def check_batch(metrics: Sequence[Point], params: Mapping[str, str],
                tags: Mapping[str, str]) -> None:
    """MLflow's limits on one batch, with its wording."""
    for what, count, limit in (("metrics", len(metrics), MAX_METRICS),
                               ("params", len(params), MAX_PARAMS),
                               ("tags", len(tags), MAX_TAGS)):
        if count > limit:
            raise InvalidInput(f"A batch logging request can contain at most {limit} {what}. "
                               f"Got {count} {what}.", hint="split it into several batches")
    for key in {*map(_KEY, metrics), *params, *tags}:  # each key once
        if not key or len(key) > MAX_KEY:
            raise InvalidInput(f"invalid key {key[:40]!r}: 1 to {MAX_KEY} characters")
    for key, value in params.items():
        if len(value) > MAX_PARAM_VALUE:
            raise InvalidInput(f"param {key!r} is {len(value)} characters long; at most "
                               f"{MAX_PARAM_VALUE}")


async def log_batch(session: AsyncSession, writer: Writer, run_id: str, *,
                    metrics: Sequence[Point], params: Mapping[str, str],
                    tags: Mapping[str, str], now: float, attempt: int | None = None) -> None:
    """``attempt``: the job's attempt that wrote the batch (a spooled record says which),
    else the one the run's job is at now (``tracking_overlap.writing_attempt``)."""
    check_batch(metrics, params, tags)
    run_id = await writable_run_id(session, writer, run_id, now)
    if params:
        await _log_params(session, run_id, params)
    if tags:
        await set_tags(session, writer, run_id, tags)
    if metrics:
        if attempt is None:
            attempt = await writing_attempt(session, run_id)
        await _log_points(session, run_id, metrics, attempt)


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


def point_rows(run_id: str, points: Sequence[Point], attempt: int = 0) -> list[tuple[Any, ...]]:
    """The rows of a batch, in ``INSERT_COLUMNS`` order; points of one key at one step and
    time are told apart by ``seq`` (their order in the batch); NaN is stored as NULL."""
    if len(set(map(_AT, points))) == len(points) and not any(map(math.isnan, map(
            _VALUE, points))):  # the usual case: each row is (0, run_id) + the point + attempt
        return list(map(add, map((0, run_id).__add__, points), repeat((attempt,))))
    seen: dict[tuple[str, int, int], int] = {}
    rows = []
    for key, value, timestamp, step in points:
        at = (key, step, timestamp)
        seq = seen[at] = seen.get(at, -1) + 1
        rows.append((seq, run_id, key, None if math.isnan(value) else value, timestamp, step,
                     attempt))
    return rows


INSERT_COLUMNS = "seq, run_id, key, value, timestamp, step, attempt"
_INSERTS = {
    "sqlite": f"INSERT OR IGNORE INTO tracking_metrics ({INSERT_COLUMNS}) "
              "VALUES (?, ?, ?, ?, ?, ?, ?)",
    "postgresql": f"INSERT INTO tracking_metrics ({INSERT_COLUMNS}) "
                  "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
}


async def insert_points(session: AsyncSession, rows: list[tuple[Any, ...]]) -> None:
    """One executemany on the driver: SQLAlchemy's per-row parameter processing cost more
    than SQLite takes to store the rows (benchmarks/tracking.py)."""
    connection = await session.connection()
    await connection.exec_driver_sql(_INSERTS[connection.dialect.name], rows)


async def _log_points(session: AsyncSession, run_id: str, points: Sequence[Point],
                      attempt: int) -> None:
    found = await overlap_of(session, run_id, points, attempt)
    if not found.kept:
        return  # every point at a step a later attempt logged
    await remove_replaced(session, run_id, found, attempt)
    await insert_points(session, point_rows(run_id, found.kept, attempt))
    await _update_latest(session, run_id, found.kept)
    await add_buckets(session, run_id, found.kept)
    await mend(session, run_id, found)


def _newest(points: Sequence[Point]) -> dict[str, tuple[Point, int]]:
    """Each key's latest point (the highest step, then time; the last of equals) and count."""
    keys = set(map(_KEY, points))
    if len(keys) == 1:  # the usual batch: one key's steps
        return {keys.pop(): (max(reversed(points), key=_WHEN), len(points))}
    by_key: dict[str, list[Point]] = {key: [] for key in keys}
    for p in points:
        by_key[p.key].append(p)
    return {key: (max(reversed(found), key=_WHEN), len(found)) for key, found in by_key.items()}


# Each key's row: its count grows by the batch's, its point is replaced by the batch's newest
# unless the stored one is newer (the SET expressions all read the row as it was)
_NEWER = "(excluded.step, excluded.timestamp) >= ({t}step, {t}timestamp)"
_LATEST = ("INSERT INTO tracking_latest (run_id, key, value, step, timestamp, count) "
           "VALUES ({marks}) ON CONFLICT (run_id, key) DO UPDATE SET "
           "count = {t}count + excluded.count, "
           + ", ".join(f"{c} = CASE WHEN {_NEWER} THEN excluded.{c} ELSE {{t}}{c} END"
                       for c in ("value", "step", "timestamp")))
_LATEST_UPSERTS = {
    "sqlite": _LATEST.format(marks=", ".join("?" * 6), t=""),
    "postgresql": _LATEST.format(marks=", ".join(f"${i}" for i in range(1, 7)),
                                 t="tracking_latest."),
}


async def _update_latest(session: AsyncSession, run_id: str, points: Sequence[Point]) -> None:
    rows = [(run_id, key, None if math.isnan(p.value) else p.value, p.step, p.timestamp, count)
            for key, (p, count) in _newest(points).items()]
    connection = await session.connection()
    await connection.exec_driver_sql(_LATEST_UPSERTS[connection.dialect.name], rows)


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
