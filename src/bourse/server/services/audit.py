"""The audit trail: who did what, from where, with what outcome; append-only, hash-chained.

Each row's ``hash`` is an HMAC (keyed with a subkey of the server key) of its fields and the
previous row's hash; the one-row ``audit_head`` holds the chain's length and last hash and is
locked by every writer, so the chain never forks. ``verify_chain`` recomputes it: an edited
row, a deleted row (in the middle or at the end) or a row inserted by hand breaks it. Newest
rows deleted with the head moved back leave a whole, shorter chain: ``verify_chain`` holds its
end against the coordinator's seal (``server.audit_seal``), kept in the data dir. Someone who
holds both the database and the data dir (the server key, the seal) can rewrite history.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.protocol.access import AuditVerdict, AuditView
from bourse.server.access import Scope
from bourse.server.audit.seal import Seal, SealError, SealFile, seal_problems
from bourse.server.db.schema import AuditHead, AuditRecord

GENESIS = "0" * 64
MASK = "***"
SECRET_KEYS = ("token", "secret", "password", "credential", "value", "authorization", "key")
_SECRET_KEY = re.compile("|".join(SECRET_KEYS))  # one search per key, not one per word
PAGE = 1000


@dataclass(frozen=True)
class Entry:
    """One audited action, before it is chained."""

    time: float
    actor: str
    actor_kind: str
    project_id: str | None
    source: str
    action: str
    target: str
    outcome: str
    params: dict[str, Any] = field(default_factory=dict)


def masked(value: Any, key: str = "") -> Any:
    """``value`` with anything that may be a secret replaced by ``***``: fields whose name
    says so, and bearer tokens wherever they appear."""
    if (key and _SECRET_KEY.search(key.lower()) and not key.endswith("_id")
            and value not in (None, "", [], {})):
        return MASK
    if isinstance(value, dict):
        if key == "env":  # a job's environment: names are kept, values may be anything
            return {str(k)[:64]: MASK for k in list(value)[:100]}
        return {str(k)[:64]: masked(v, str(k)) for k, v in list(value.items())[:100]}
    if isinstance(value, list):
        return [masked(v) for v in value[:100]]
    if isinstance(value, str):
        return MASK if value.startswith("bse_") else value[:1000]
    return value


def _fields(row: AuditRecord | Entry, row_id: int | None) -> dict[str, Any]:
    return {"id": row_id, "time": repr(row.time), "actor": row.actor,
            "actor_kind": row.actor_kind, "project": row.project_id, "source": row.source,
            "action": row.action, "target": row.target, "params": row.params,
            "outcome": row.outcome}


def chain_hash(key: bytes, prev_hash: str, fields: dict[str, Any]) -> str:
    message = json.dumps([prev_hash, fields], sort_keys=True, separators=(",", ":"))
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


async def ensure_head(session: AsyncSession) -> None:
    """The chain's head row (made by migration 0008), for an empty table only: a chain whose
    head was deleted while rows remain is reported by ``verify_chain``, not repaired."""
    if await session.get(AuditHead, 1) is None and await session.scalar(
            select(AuditRecord.id).limit(1)) is None:
        session.add(AuditHead(id=1, count=0, hash=GENESIS))


async def append(session: AsyncSession, key: bytes, *entries: Entry) -> list[AuditRecord]:
    """Chain ``entries`` in order after the head, which is read (and locked) once."""
    head = await session.get(AuditHead, 1, with_for_update=True)
    assert head is not None, "the audit chain's head row is missing (migration 0008)"
    return [_link(session, key, head, entry) for entry in entries]


def _link(session: AsyncSession, key: bytes, head: AuditHead, entry: Entry) -> AuditRecord:
    row_id = head.count + 1
    record = AuditRecord(id=row_id, time=entry.time, actor=entry.actor[:80],
                         actor_kind=entry.actor_kind, project_id=entry.project_id,
                         source=entry.source[:64], action=entry.action[:128],
                         target=entry.target[:512], params=entry.params,
                         outcome=entry.outcome[:64], prev_hash=head.hash, hash="")
    record.hash = chain_hash(key, head.hash, _fields(record, row_id))
    session.add(record)
    head.count, head.hash = row_id, record.hash
    return record


async def head(session: AsyncSession) -> Seal:
    """Where the chain in the database ends, as its head row says."""
    found = await session.get(AuditHead, 1)
    return Seal(0, GENESIS) if found is None else Seal(found.count, found.hash)


async def verify_chain(session: AsyncSession, key: bytes,
                       seal: SealFile | None = None) -> AuditVerdict:
    """Walk the chain in id order, then hold its end against the head row and the
    coordinator's seal; every break found is a problem (the first 20 listed)."""
    problems: list[str] = []
    sealed: Seal | None = None
    if seal is not None:  # read first: records committed meanwhile only lengthen the chain
        try:
            sealed = seal.read()
        except SealError as exc:
            problems.append(str(exc))
    walk = await _walk(session, key, sealed.seq if sealed is not None else None)
    problems += walk.problems
    found = await session.get(AuditHead, 1)
    if found is None or found.count != walk.ended or found.hash != walk.last_hash:
        problems.append(f"the chain ends at row {walk.ended} but its head says "
                        f"{found.count if found else 'nothing'}: rows were deleted or added")
    if sealed is not None:
        problems += seal_problems(sealed, walk.ended, walk.hash_at_seal)
    return AuditVerdict(ok=not problems, checked=walk.ended, problems=problems[:20],
                        sealed=sealed.seq if sealed is not None else None)


@dataclass
class _Walk:
    problems: list[str] = field(default_factory=list)
    ended: int = 0  # the last row's id
    last_hash: str = GENESIS
    hash_at_seal: str | None = None  # the hash of the row at the seal's seq


async def _walk(session: AsyncSession, key: bytes, sealed_seq: int | None) -> _Walk:
    walk = _Walk(hash_at_seal=GENESIS if sealed_seq == 0 else None)
    while True:
        rows = (await session.scalars(select(AuditRecord).where(AuditRecord.id > walk.ended)
                                      .order_by(AuditRecord.id).limit(PAGE))).all()
        for row in rows:
            walk.problems += _check(row, key, walk.ended + 1, walk.last_hash)
            walk.ended, walk.last_hash = row.id, row.hash
            if row.id == sealed_seq:
                walk.hash_at_seal = row.hash
        if len(rows) < PAGE:
            return walk


def _check(row: AuditRecord, key: bytes, expected_id: int, expected_prev: str) -> list[str]:
    found = []
    if row.id != expected_id:
        found.append(f"rows {expected_id}..{row.id - 1} are missing")
    if row.prev_hash != expected_prev:
        found.append(f"row {row.id} does not follow the row before it")
    if row.hash != chain_hash(key, row.prev_hash, _fields(row, row.id)):
        found.append(f"row {row.id} was changed after it was written")
    return found


def view(row: AuditRecord) -> AuditView:
    return AuditView(id=row.id, time=row.time, actor=row.actor, actor_kind=row.actor_kind,
                     project=row.project_id, source=row.source, action=row.action,
                     target=row.target, params=row.params, outcome=row.outcome)


async def list_records(session: AsyncSession, scope: Scope, since: float | None, after: int,
                       limit: int) -> list[AuditRecord]:
    query = scope.filter(select(AuditRecord).where(AuditRecord.id > after),
                         AuditRecord.project_id)
    if since is not None:
        query = query.where(AuditRecord.time >= since)
    return list((await session.scalars(query.order_by(AuditRecord.id).limit(limit))).all())
