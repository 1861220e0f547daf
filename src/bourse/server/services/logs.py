"""Log chunks on their way into the database: the rate meter's verdict, and secrets redacted
across chunk boundaries.

A job that names secrets has each chunk redacted together with the tail of what its stream
stored before (``redact.redact_parts``): a value split between chunks — a partial line flushed
in the middle of it, a line longer than a chunk, a job printing it byte by byte — is masked
whole, and the earlier rows it started in are rewritten in the same transaction. The tail is
read from the database, so it holds across coordinator restarts and replicas, and nothing
waits: chunks are stored as soon as they arrive. Jobs without secrets are stored as before,
in batches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Table, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core import redact
from bourse.core.units import format_bytes
from bourse.server.db.schema import Attempt
from bourse.server.db.schema import LogChunk as LogRow
from bourse.server.db.upsert import insert_ignore
from bourse.server.logs.meter import LogMeter
from bourse.server.services.lifecycle import add_event

LOG_TABLE = cast(Table, LogRow.__table__)
Row = dict[str, Any]
BATCH = 200  # rows an INSERT


def metered(rows: Sequence[Row], attempts: Mapping[tuple[str, int], Attempt], meter: LogMeter,
            now: float) -> list[Row]:
    """The rows the rate meter lets through (a marker before the first after a drop)."""
    kept = []
    for row in rows:
        attempt = attempts[(row["job_id"], row["attempt"])]
        # placed_at is the coordinator's clock; started_at is the agent's, which it could lie
        data = meter.admit((row["job_id"], row["attempt"]), row["stream"], row["data"],
                           attempt.placed_at, now)
        if data is not None:
            kept.append({**row, "data": data})
    return kept


def note_limited(session: AsyncSession, meter: LogMeter, now: float) -> None:
    for job_id, attempt in meter.take_limited():
        add_event(session, job_id, attempt, "info", now, message=(
            f"the node sent more log than the limit ({meter.limit.describe()}, "
            f"{format_bytes(meter.limit.burst)} at once) allows; the rest is dropped"))


async def store_rows(session: AsyncSession, rows: Sequence[Row],
                     patterns: Mapping[str, tuple[bytes, ...]]) -> int:
    """Insert rows, duplicates ignored; returns how many were new."""
    plain = [r for r in rows if not patterns.get(r["job_id"])]
    inserted = 0
    for start in range(0, len(plain), BATCH):
        inserted += await insert_ignore(session, LOG_TABLE, plain[start:start + BATCH])
    for row in rows:
        searched = patterns.get(row["job_id"])
        if searched:
            inserted += await _store_redacted(session, row, searched)
    return inserted


async def _store_redacted(session: AsyncSession, row: Row, searched: tuple[bytes, ...]) -> int:
    before = await _tail(session, row, redact.tail_bytes(searched))
    parts = redact.redact_parts([data for _, data in before] + [row["data"]], searched)
    if not await insert_ignore(session, LOG_TABLE, [{**row, "data": parts[-1]}]):
        return 0  # a re-sent chunk: redacted when it was first stored
    for (row_id, data), redacted in zip(before, parts, strict=False):
        if redacted != data:
            await session.execute(update(LogRow).where(LogRow.id == row_id)
                                  .values(data=redacted))
    return 1


async def _tail(session: AsyncSession, row: Row, need: int) -> list[tuple[int, bytes]]:
    """The stream's rows just before ``row`` holding at least ``need`` bytes, oldest first."""
    if need <= 0:
        return []
    sizes = (await session.execute(
        select(LogRow.id, func.length(LogRow.data)).where(
            LogRow.job_id == row["job_id"], LogRow.attempt == row["attempt"],
            LogRow.rank == row.get("rank", 0), LogRow.stream == row["stream"],
            LogRow.seq < row["seq"])
        .order_by(LogRow.seq.desc()).limit(need))).all()
    ids, total = [], 0
    for row_id, size in sizes:
        if total >= need:
            break
        ids.append(row_id)
        total += size or 0
    if not ids:
        return []
    found = dict((await session.execute(
        select(LogRow.id, LogRow.data).where(LogRow.id.in_(ids)))).all())
    return [(i, found[i]) for i in reversed(ids)]
