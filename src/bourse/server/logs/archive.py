"""Logs of ended jobs move from the database into the exchange's store.

A job that ended more than ``archive_after_s`` ago has its log chunks written to
``s3://<bucket>/logs/<job id>.jsonl.gz`` (one JSON line per chunk, with its cursor, in cursor
order), then the job records the key and its rows are deleted — in that order, so a crash in
between only repeats the upload. Readers see no difference: cursors, attempts, sequence
numbers and offsets are those the chunks had in the database, and ``read_logs`` merges the
archive with any rows that arrived after it (a lost attempt's node replaying late chunks),
which the next pass folds into the archive.

Each line is a ``LogChunkView``, so a gang member's chunks keep their ``rank``; archives
written before gangs have no ``rank`` and read as rank 0, which every chunk then was.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

from sqlalchemy import delete, exists, select

from bourse.core.states import JOB_TERMINAL
from bourse.protocol.api import LogChunkView
from bourse.server.db.database import Database
from bourse.server.db.schema import Job, LogChunk
from bourse.storage.errors import StorageError
from bourse.storage.store import ObjectStore

log = logging.getLogger(__name__)

PREFIX = "logs/"
BATCH = 20  # jobs archived per pass
CACHED = 8  # decoded archives kept in memory for readers


def archive_key(job_id: str) -> str:
    return f"{PREFIX}{job_id}.jsonl.gz"


def encode(chunks: Iterable[LogChunkView]) -> bytes:
    """Chunks as gzipped JSON lines, in cursor order, one per cursor."""
    unique = {c.cursor: c for c in chunks}
    lines = (unique[k].model_dump_json() for k in sorted(unique))
    return gzip.compress("\n".join(lines).encode(), compresslevel=6)


def decode(data: bytes) -> list[LogChunkView]:
    text = gzip.decompress(data).decode()
    return [LogChunkView.model_validate_json(line) for line in text.splitlines() if line]


def view(row: LogChunk) -> LogChunkView:
    return LogChunkView(cursor=row.id, attempt=row.attempt, rank=row.rank, seq=row.seq,
                        stream=row.stream, offset=row.offset,
                        data=base64.b64encode(row.data).decode(), time=row.time)


def merge(archived: Sequence[LogChunkView], rows: Sequence[LogChunkView], after: int,
          limit: int, rank: int | None = None) -> list[LogChunkView]:
    """The first ``limit`` chunks after the cursor from an archive and the rows beside it
    (only member ``rank``'s, when given)."""
    unique = {c.cursor: c for c in (*archived, *rows)
              if c.cursor > after and (rank is None or c.rank == rank)}
    return [unique[k] for k in sorted(unique)[:limit]]


def as_text(chunks: Iterable[LogChunkView]) -> bytes:
    """A log as one file to download: each member's output in the order it arrived (stdout and
    stderr as they interleaved), under a ``==> rank N <==`` line when there are several, and a
    ``--- attempt N ---`` line where a new attempt begins."""
    ordered = sorted(chunks, key=lambda c: (c.rank, c.cursor))
    ranks = {c.rank for c in ordered}
    out: list[bytes] = []
    where: tuple[int, int] | None = None
    for chunk in ordered:
        if len(ranks) > 1 and (where is None or where[0] != chunk.rank):
            _mark(out, f"==> rank {chunk.rank} <==")
            where = None
        if where is not None and where[1] != chunk.attempt:
            _mark(out, f"--- attempt {chunk.attempt} ---")
        where = (chunk.rank, chunk.attempt)
        if data := base64.b64decode(chunk.data):
            out.append(data)
    return b"".join(out)


def _mark(out: list[bytes], line: str) -> None:
    """A marker on a line of its own, even after output that did not end one."""
    if out and not out[-1].endswith(b"\n"):
        out.append(b"\n")
    out.append(line.encode() + b"\n")


class LogArchive:
    """Writes and reads archived logs in the exchange's store."""

    def __init__(self, db: Database, store: ObjectStore, clock: Callable[[], float],
                 after_s: float) -> None:
        self.db, self.store, self.clock, self.after_s = db, store, clock, after_s
        self._cache: OrderedDict[str, list[LogChunkView]] = OrderedDict()

    async def read(self, key: str) -> list[LogChunkView]:
        """An archive's chunks (the last few read are kept decoded)."""
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        chunks = decode(bytes(await self.store.get(key)))
        self._cache[key] = chunks
        while len(self._cache) > CACHED:
            self._cache.popitem(last=False)
        return chunks

    async def due(self) -> list[str]:
        """Ended jobs older than the delay that still have rows, oldest first."""
        async with self.db.read() as session:
            found = await session.scalars(
                select(Job.id).where(Job.state.in_(sorted(JOB_TERMINAL)),
                                     Job.updated_at < self.clock() - self.after_s,
                                     exists().where(LogChunk.job_id == Job.id))
                .order_by(Job.updated_at).limit(BATCH))
            return list(found.all())

    async def archive(self, job_id: str) -> int:
        """Move one job's rows into its archive; how many chunks moved."""
        async with self.db.read() as session:
            previous = await session.scalar(select(Job.logs_archive).where(Job.id == job_id))
            rows = [view(r) for r in (await session.scalars(
                select(LogChunk).where(LogChunk.job_id == job_id))).all()]
        if not rows:
            return 0
        archived = await self.read(previous) if previous else []
        key = archive_key(job_id)
        await self.store.put(key, await asyncio.to_thread(encode, [*archived, *rows]))
        self._cache.pop(key, None)
        last = max(c.cursor for c in rows)
        async with self.db.write() as session:
            job = await session.get(Job, job_id)
            assert job is not None
            job.logs_archive = key
            await session.execute(delete(LogChunk).where(LogChunk.job_id == job_id,
                                                         LogChunk.id <= last))
        return len(rows)

    async def tick(self) -> int:
        """One pass: archive what is due; a failing job is logged and retried next pass."""
        moved = 0
        for job_id in await self.due():
            try:
                moved += await self.archive(job_id)
            except StorageError as exc:
                log.warning("archiving the logs of %s failed: %s", job_id, exc.message)
        return moved

    async def run(self, interval_s: float | None = None) -> None:
        """Passes every minute, or more often when the delay is short."""
        interval = interval_s or min(60.0, max(0.5, self.after_s / 2))
        while True:
            await asyncio.sleep(interval)
            try:
                await self.tick()
            except Exception:
                log.exception("log archive pass failed; retrying on the next one")
