"""Group commit for the audit trail: entries are appended to the chain in arrival order, as
many per transaction as arrived meanwhile (``db.group``). Each caller still waits until its
own entry is committed (a record is durable before the response goes out), but concurrent
requests share one commit instead of queueing for one each.

After each commit the chain's new head is sealed (``audit_seal``), if the chain it was built
on continues the seal."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.server.audit.seal import Seal, SealError, SealFile
from bourse.server.db.database import Database
from bourse.server.db.group import GroupCommit
from bourse.server.db.schema import AuditRecord
from bourse.server.services import audit

log = logging.getLogger(__name__)
NEW_SEAL = "bourse.audit_seal"  # in ``session.info``: the head to seal once committed


class AuditWriter:
    def __init__(self, db: Database, key: Callable[[], bytes]) -> None:
        self.db, self.key = db, key
        self._group: GroupCommit[audit.Entry, None] = GroupCommit(db, self._append)
        self.seal: SealFile | None = None  # opened at start (``open_seal``)
        self.sealed: Seal | None = None  # what the seal on disk says
        self._cut_reported = False
        db.after_commit.append(self._sealed)

    async def open_seal(self, seal: SealFile) -> None:
        """Use ``seal``; the first start seals the chain's head as it finds it. A seal that
        is ahead of the chain, or damaged, is kept and logged (``verify`` reports it)."""
        self.seal = seal
        async with self.db.read() as session:
            found = await audit.head(session)
        if not seal.exists():
            seal.write(found)
            self.sealed = found
            log.log(logging.WARNING if found.seq else logging.INFO,
                    "no audit seal in %s: the chain is sealed as found, at row %d (the "
                    "first start of this version, or the seal was removed)", seal.path,
                    found.seq)
            return
        try:
            self.sealed = seal.read()
        except SealError as exc:
            log.error("%s; the trail's seal is not moved (bourse audit verify)", exc)
            return
        if found.seq < self.sealed.seq:
            self._report_cut(found)

    async def write(self, entry: audit.Entry) -> None:
        """Append ``entry``; returns once it is committed, raises what the commit raised."""
        await self._group.write(entry)

    async def _append(self, session: AsyncSession,
                      entries: Sequence[audit.Entry]) -> list[Exception | None]:
        # the key is derived from the server key: once per group
        records = await audit.append(session, self.key(), *entries)
        if records and self.sealed is not None and await self._continues(
                session, Seal(records[0].id - 1, records[0].prev_hash)):
            session.info[NEW_SEAL] = Seal(records[-1].id, records[-1].hash)
        return [None] * len(entries)

    async def _continues(self, session: AsyncSession, built_on: Seal) -> bool:
        """Whether the chain under the locked head still holds the sealed row: the head is
        the sealed one, or (other replicas wrote since) the sealed row is in place."""
        sealed = self.sealed
        assert sealed is not None
        if built_on == sealed or sealed.seq == 0:  # (the genesis is always in place)
            return True
        if built_on.seq > sealed.seq and await session.scalar(select(AuditRecord.hash).where(
                AuditRecord.id == sealed.seq)) == sealed.hash:
            return True
        self._report_cut(built_on)
        return False

    def _report_cut(self, found: Seal) -> None:
        if self._cut_reported:
            return
        self._cut_reported = True
        assert self.sealed is not None
        log.error("the audit chain was cut or rewritten: its head is row %d, but this "
                  "coordinator sealed row %d; the seal stays there (bourse audit verify)",
                  found.seq, self.sealed.seq)

    def _sealed(self, info: dict[str, Any]) -> None:
        new: Seal | None = info.pop(NEW_SEAL, None)
        if new is None or self.seal is None:
            return
        try:
            self.seal.write(new)
        except OSError as exc:  # the records are committed: only the seal lags behind
            log.error("could not seal the audit trail at row %d in %s: %s", new.seq,
                      self.seal.path, exc.strerror)
            return
        self.sealed = new

    def close(self) -> None:
        if self.seal is not None:
            self.seal.close()
