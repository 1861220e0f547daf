"""Group commit for the audit trail: entries are appended to the chain in arrival order, as
many per transaction as arrived meanwhile. Each caller still waits until its own entry is
committed (a record is durable before the response goes out), but concurrent requests share
one commit instead of queueing for one each."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from bourse.server.db.database import Database
from bourse.server.services import audit


class AuditWriter:
    def __init__(self, db: Database, key: Callable[[], bytes]) -> None:
        self.db, self.key = db, key
        self._queue: list[tuple[audit.Entry, asyncio.Future[None]]] = []
        self._drain: asyncio.Task[None] | None = None

    async def write(self, entry: audit.Entry) -> None:
        """Append ``entry``; returns once it is committed, raises what the commit raised."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((entry, done))
        if self._drain is None or self._drain.done():
            # a task of its own: a caller that goes away never stops the others' commit
            self._drain = asyncio.ensure_future(self._drain_all())
        await done

    async def _drain_all(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                key = self.key()  # derived from the server key: once per batch
                async with self.db.write() as session:
                    await audit.append(session, key, *(entry for entry, _ in batch))
            except Exception as exc:
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
            else:
                for _, done in batch:
                    if not done.done():
                        done.set_result(None)
