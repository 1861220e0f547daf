"""Log retention: an ended job's logs are deleted once it ended longer ago than the exchange
keeps logs (``bourse server --log-retention``; unset, the default: kept for ever).

Each pass takes the oldest few jobs that are due — ended before the cut-off, with rows in the
database or an archive in the store — and prunes them one by one, each in a transaction of
its own that deletes one job's rows (``BATCH`` jobs a pass), so that a pass never holds the
database long enough to stall the writers of running jobs' logs. The archive is deleted from
the store first, then the rows, and the job records ``PRUNED`` in ``logs_archive``: a crash in
between only repeats the deletion. Readers of a pruned job's logs get no chunks and
``pruned`` (``LogPage``), and say so, rather than an empty log that looks like silence.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from sqlalchemy import delete, exists, or_, select

from bourse.core.states import JOB_TERMINAL
from bourse.server.db.database import Database
from bourse.server.db.schema import Job, LogChunk
from bourse.storage.errors import ObjectNotFound, StorageError
from bourse.storage.store import ObjectStore

log = logging.getLogger(__name__)

PRUNED = "pruned"  # logs_archive of a job whose logs retention deleted (keys start logs/)
BATCH = 20  # jobs pruned per pass


def is_pruned(logs_archive: str | None) -> bool:
    return logs_archive == PRUNED


class LogRetention:
    """Deletes the logs of jobs that ended more than ``keep_s`` ago."""

    def __init__(self, db: Database, store: ObjectStore | None, clock: Callable[[], float],
                 keep_s: float) -> None:
        self.db, self.store, self.clock, self.keep_s = db, store, clock, keep_s

    async def due(self) -> list[tuple[str, str | None]]:
        """(job id, archive key) of ended jobs past the cut-off whose logs are still kept,
        oldest first."""
        archived = Job.logs_archive.is_not(None) & (Job.logs_archive != PRUNED)
        async with self.db.read() as session:
            found = await session.execute(
                select(Job.id, Job.logs_archive).where(
                    Job.state.in_(sorted(JOB_TERMINAL)),
                    Job.updated_at < self.clock() - self.keep_s,
                    or_(archived, exists().where(LogChunk.job_id == Job.id)))
                .order_by(Job.updated_at).limit(BATCH))
            return [(row.id, row.logs_archive) for row in found]

    async def prune(self, job_id: str, archive: str | None) -> None:
        """Delete one job's archive (if any), then its rows, and mark it pruned."""
        if archive is not None and not is_pruned(archive):
            if self.store is None:
                raise StorageError(f"the logs of {job_id} are archived in the store, and this "
                                   "coordinator has no store")
            with contextlib.suppress(ObjectNotFound):  # a pass that crashed before marking
                await self.store.delete(archive)
        async with self.db.write() as session:
            await session.execute(delete(LogChunk).where(LogChunk.job_id == job_id))
            job = await session.get(Job, job_id)
            if job is not None:
                job.logs_archive = PRUNED

    async def tick(self) -> int:
        """One pass: prune what is due; how many jobs were. A failing job is logged and tried
        again on the next pass."""
        pruned = 0
        for job_id, archive in await self.due():
            try:
                await self.prune(job_id, archive)
                pruned += 1
            except StorageError as exc:
                log.warning("deleting the logs of %s failed: %s", job_id, exc.message)
        return pruned

    async def run(self, interval_s: float | None = None) -> None:
        """Passes every ten minutes, or more often when the retention is short; a pass that
        pruned a whole batch is followed by the next at once (a backlog drains quickly)."""
        interval = interval_s or min(600.0, max(0.5, self.keep_s / 10))
        while True:
            try:
                if await self.tick() == BATCH:
                    await asyncio.sleep(0)
                    continue
            except Exception:
                log.exception("log retention pass failed; retrying on the next one")
            await asyncio.sleep(interval)
