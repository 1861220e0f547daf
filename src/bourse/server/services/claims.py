"""Which project owns which part of the object store.

A prefix belongs to the project whose job first wrote there: submitting a job claims every
location it writes (its outputs and its checkpoint prefix) for the job's project, in the
submit's transaction. Where a location overlaps — contains or lies inside — a prefix claimed
by another project, the job is refused, whether it would write there or read from there
(``ForeignData``, 403, which says nothing of the owner). Locations nobody claimed — data put in
the store outside bourse — are read by any project's jobs. Claims outlive their jobs, as the
data does.

The exchange's own ``jobs/<id>/`` (default checkpoints) is never claimed: it belongs to the
job's project, looked up from the job. Which prefixes the exchange keeps for itself is
``dataplane.plan``'s business (`check_spec`).

Claims are checked and made one transaction at a time: SQLite has one writer, PostgreSQL
takes a transaction-scoped advisory lock, so two projects cannot claim overlapping prefixes
at once.
"""

from __future__ import annotations

from typing import cast

from sqlalchemy import ColumnElement, Table, and_, func, or_, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import InvalidInput, NotFound
from bourse.protocol.common import JobSpec
from bourse.server.dataplane.plan import ancestors, below, check_read, job_of, reads, writes
from bourse.server.db.schema import Job, StoreClaim
from bourse.server.db.upsert import insert_ignore
from bourse.server.errors import ForeignData
from bourse.storage.uri import StoreURI

LOCK = 0x626F75727365  # the advisory lock that orders claims on PostgreSQL ("bourse")
MAX_KEY_BYTES = 1024  # S3's own limit on a key
CLAIMS = cast(Table, StoreClaim.__table__)


async def claim_spec(session: AsyncSession, spec: JobSpec, job_id: str, project_id: str,
                     root: StoreURI | None, *, now: float) -> None:
    """Check what a job (its spec resolved) reads and writes against other projects' claims,
    then claim what it writes for its project."""
    read, written = reads(spec), writes(spec)
    if root is None or not (read or written):
        return
    await _serialise(session)
    for field, uri in read:
        await check_readable(session, field, uri, project_id, root)
    for field, uri in written:
        await _check_free(session, field, uri, project_id, root, write=True)
    claimed = {uri for _, uri in written if job_of(uri, root) is None}
    await insert_ignore(session, CLAIMS, [_claim(u, project_id, job_id, now) for u in claimed])


async def check_readable(session: AsyncSession, field: str, uri: StoreURI, project_id: str,
                         root: StoreURI) -> None:
    """Refuse a location a job of ``project_id`` may not read: another project's claim or
    job prefix (``check_spec`` has refused the exchange's other prefixes)."""
    job = job_of(uri, root)
    if job is not None:
        if await session.scalar(select(Job.project_id).where(Job.id == job)) != project_id:
            raise _foreign(field, uri, project_id, root, write=False)
        return
    await _check_free(session, field, uri, project_id, root, write=False)


async def taken_input(session: AsyncSession, spec: JobSpec, project_id: str) -> str | None:
    """Why a job can no longer read one of its inputs: another project claimed it after the
    job was submitted (placement asks before each attempt); None while all are readable.
    Inputs in ``jobs/<id>/`` need no second look: a job's project never changes."""
    for field, uri in reads(spec):
        if await foreign_claim(session, uri, project_id):
            return (f"{field}: {uri} belongs to another project (claimed after this job was "
                    "submitted)")
    return None


async def check_visible(session: AsyncSession, uri: StoreURI, project_id: str,
                        root: StoreURI) -> None:
    """What ``GET /data/summary`` may tell a project about: what its jobs may read. Anything
    else is as missing (404) as another project's job."""
    try:
        check_read("uri", uri, root)
        await check_readable(session, "uri", uri, project_id, root)
    except (InvalidInput, ForeignData) as exc:
        raise NotFound(f"no data your project may read at {uri}",
                       hint="a project reads what its own jobs wrote, or data put in the store "
                            "outside bourse") from exc


async def foreign_claim(session: AsyncSession, uri: StoreURI, project_id: str) -> bool:
    """Whether a prefix claimed by another project overlaps the location ``uri``: one of its
    ancestors (an index look-up each) or a key in the range below it (an index range)."""
    found = await session.scalar(select(StoreClaim.prefix).where(
        StoreClaim.scheme == uri.scheme, StoreClaim.bucket == uri.bucket,
        StoreClaim.project_id != project_id, _overlapping(uri.as_prefix().key)).limit(1))
    return found is not None


def _overlapping(key: str) -> ColumnElement[bool]:
    span = below(key)
    if span is None:  # the whole bucket
        return true()
    return or_(StoreClaim.prefix.in_(ancestors(key)),
               and_(StoreClaim.prefix >= span[0], StoreClaim.prefix < span[1]))


async def _check_free(session: AsyncSession, field: str, uri: StoreURI, project_id: str,
                      root: StoreURI, *, write: bool) -> None:
    if write and len(uri.key.encode()) > MAX_KEY_BYTES:
        raise InvalidInput(f"{field}: {uri} is longer than an S3 key may be "
                           f"({MAX_KEY_BYTES} bytes)", field=field, hint="use a shorter prefix")
    if await foreign_claim(session, uri, project_id):
        raise _foreign(field, uri, project_id, root, write=write)


def _foreign(field: str, uri: StoreURI, project_id: str, root: StoreURI,
             write: bool) -> ForeignData:
    if write:
        hint = ("write under a prefix of your own project's, e.g. "
                f"{root.join('data', project_id, '')}")
    else:
        hint = ("a job reads what its own project's jobs wrote, or data put in the store "
                "outside bourse")
    return ForeignData(f"{field}: {uri} belongs to another project", field=field, hint=hint)


def _claim(uri: StoreURI, project_id: str, job_id: str, now: float) -> dict[str, object]:
    return {"scheme": uri.scheme, "bucket": uri.bucket, "prefix": uri.key,
            "project_id": project_id, "job_id": job_id, "created_at": now}


async def _serialise(session: AsyncSession) -> None:
    if session.get_bind().dialect.name == "postgresql":
        await session.execute(select(func.pg_advisory_xact_lock(LOCK)))
