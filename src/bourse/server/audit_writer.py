"""Group commit for the audit trail: entries are appended to the chain in arrival order, as
many per transaction as arrived meanwhile (``db.group``). Each caller still waits until its
own entry is committed (a record is durable before the response goes out), but concurrent
requests share one commit instead of queueing for one each."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from bourse.server.db.database import Database
from bourse.server.db.group import GroupCommit
from bourse.server.services import audit


class AuditWriter:
    def __init__(self, db: Database, key: Callable[[], bytes]) -> None:
        self.key = key
        self._group: GroupCommit[audit.Entry, None] = GroupCommit(db, self._append)

    async def write(self, entry: audit.Entry) -> None:
        """Append ``entry``; returns once it is committed, raises what the commit raised."""
        await self._group.write(entry)

    async def _append(self, session: AsyncSession,
                      entries: Sequence[audit.Entry]) -> list[Exception | None]:
        # the key is derived from the server key: once per group
        await audit.append(session, self.key(), *entries)
        return [None] * len(entries)
