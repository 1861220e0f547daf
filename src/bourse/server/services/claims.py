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

from collections.abc import Sequence
from typing import cast

from sqlalchemy import ColumnElement, Exists, Table, bindparam, exists, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.errors import InvalidInput, NotFound
from bourse.core.uri import StoreURI
from bourse.protocol.common import JobSpec
from bourse.server.dataplane.plan import (
    ancestors,
    below,
    check_read,
    home_of,
    home_uri,
    job_of,
    reads,
    writes,
)
from bourse.server.db.schema import Job, StoreClaim
from bourse.server.db.upsert import insert_ignore
from bourse.server.errors import ForeignData

LOCK = 0x626F75727365  # the advisory lock that orders claims on PostgreSQL ("bourse")
MAX_KEY_BYTES = 1024  # S3's own limit on a key
CLAIMS = cast(Table, StoreClaim.__table__)


async def claim_spec(session: AsyncSession, spec: JobSpec, job_id: str, project_id: str,
                     root: StoreURI | None, *, now: float) -> None:
    """Check what a job (its spec resolved) reads and writes against other projects' claims,
    then claim what it writes for its project (its default checkpoint, in ``jobs/<id>/``, is
    its own already)."""
    if root is not None:
        await claim_locations(session, reads(spec), writes(spec), project_id, root,
                              claimant=job_id, now=now)


async def claim_locations(session: AsyncSession, read: Sequence[tuple[str, StoreURI]],
                          written: Sequence[tuple[str, StoreURI]], project_id: str,
                          root: StoreURI, *, claimant: str, now: float) -> None:
    """Check (field, location) pairs read and written against other projects' claims and
    homes, then claim the written ones for ``project_id`` (``claimant``: the job, or the
    store credentials, that claimed them)."""
    if not (read or written):
        return
    await _serialise(session)
    claimed = [(f, u) for f, u in written if job_of(u, root) is None]
    for field, uri in claimed:
        _check_length(field, uri)
        await _check_job(session, field, uri, project_id, root, write=True)
    for field, uri in read:
        await _check_job(session, field, uri, project_id, root)
    refused = await _first_foreign(session, [*read, *claimed], project_id)
    if refused is not None:
        field, uri = refused
        raise _foreign(field, uri, project_id, root, write=(field, uri) in claimed)
    await insert_ignore(session, CLAIMS, [_claim(u, project_id, claimant, now)
                                          for u in {u for _, u in claimed}])


async def check_readable(session: AsyncSession, field: str, uri: StoreURI, project_id: str,
                         root: StoreURI) -> None:
    """Refuse a location a job of ``project_id`` may not read: another project's claim or
    job prefix (``check_spec`` has refused the exchange's other prefixes)."""
    await _check_job(session, field, uri, project_id, root)
    if await _first_foreign(session, [(field, uri)], project_id) is not None:
        raise _foreign(field, uri, project_id, root, write=False)


async def taken_input(session: AsyncSession, spec: JobSpec, project_id: str) -> str | None:
    """Why a job can no longer read one of its inputs: another project claimed it after the
    job was submitted (placement asks before each attempt); None while all are readable.
    Inputs in ``jobs/<id>/`` need no second look: a job's project never changes."""
    refused = await _first_foreign(session, reads(spec), project_id)
    if refused is None:
        return None
    field, uri = refused
    return f"{field}: {uri} belongs to another project (claimed after this job was submitted)"


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


async def _first_foreign(session: AsyncSession, located: Sequence[tuple[str, StoreURI]],
                         project_id: str) -> tuple[str, StoreURI] | None:
    """The first (field, location) that a prefix claimed by another project overlaps."""
    for field, uri in located:
        key = uri.as_prefix().key
        span = below(key)
        if span is None:  # the whole bucket: any claim in it
            found = await session.scalar(_IN_BUCKET, {
                "scheme": uri.scheme, "bucket": uri.bucket, "project": project_id})
        else:
            found = await session.scalar(_OVERLAPPING, {
                "scheme": uri.scheme, "bucket": uri.bucket, "project": project_id,
                "ancestors": ancestors(key), "low": span[0], "high": span[1]})
        if found:
            return field, uri
    return None


def _claims_where(*where: ColumnElement[bool]) -> Exists:
    c = CLAIMS.c
    return exists().where(c.scheme == bindparam("scheme"), c.bucket == bindparam("bucket"),
                          c.project_id != bindparam("project"), *where)


# Built once (compiled once): another project's claim among the ancestors of a location
# (index look-ups), or in the range of keys below it (an index range), each apart so that
# each uses the index.
_OVERLAPPING = select(or_(
    _claims_where(CLAIMS.c.prefix.in_(bindparam("ancestors", expanding=True))),
    _claims_where(CLAIMS.c.prefix >= bindparam("low"), CLAIMS.c.prefix < bindparam("high"))))
_IN_BUCKET = select(_claims_where())


async def _check_job(session: AsyncSession, field: str, uri: StoreURI, project_id: str,
                     root: StoreURI, *, write: bool = False) -> None:
    """Refuse a location inside another project's home ``projects/<project>/``, or a read
    inside another project's ``jobs/<id>/`` (or a job that does not exist, in the same
    words)."""
    home = home_of(uri, root)
    if home is not None and home != project_id:
        raise _foreign(field, uri, project_id, root, write=write)
    job = job_of(uri, root)
    if job is not None and await session.scalar(
            select(Job.project_id).where(Job.id == job)) != project_id:
        raise _foreign(field, uri, project_id, root, write=False)


def _check_length(field: str, uri: StoreURI) -> None:
    if len(uri.key.encode()) > MAX_KEY_BYTES:
        raise InvalidInput(f"{field}: {uri} is longer than an S3 key may be "
                           f"({MAX_KEY_BYTES} bytes)", field=field, hint="use a shorter prefix")


def _foreign(field: str, uri: StoreURI, project_id: str, root: StoreURI,
             write: bool) -> ForeignData:
    if write:
        hint = f"write under your project's home, e.g. {home_uri(root, project_id)}"
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
