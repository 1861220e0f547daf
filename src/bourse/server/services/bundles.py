"""Who knows of a bundle: the projects that uploaded it, and the nodes that run its jobs.

The bytes are stored once per SHA-256; whether a bundle exists is answered only to a project
that uploaded it (another project cannot probe for someone else's code by its hash) and to a
node with an active attempt of a job that names it.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.server.db.schema import Attempt, Bundle, BundleOwner, Job
from bourse.server.services.jobs import active_attempt_states
from bourse.server.services.tokens import Principal


async def record_upload(session: AsyncSession, sha256: str, size: int, project_id: str,
                        now: float) -> None:
    """The bundle's row (also repairing a stored file without one) and its owner."""
    if await session.get(Bundle, sha256) is None:
        session.add(Bundle(sha256=sha256, size=size, created_at=now))
    if await session.get(BundleOwner, (sha256, project_id)) is None:
        session.add(BundleOwner(sha256=sha256, project_id=project_id))


async def may_read(session: AsyncSession, sha256: str, who: Principal) -> bool:
    if who.kind == "node":
        return await _node_runs(session, sha256, who.node_id)
    if who.admin:
        return await session.get(Bundle, sha256) is not None
    return await session.get(BundleOwner, (sha256, who.project_id)) is not None


async def _node_runs(session: AsyncSession, sha256: str, node_id: str | None) -> bool:
    specs = await session.scalars(select(Job.spec).join(Attempt, Attempt.job_id == Job.id).where(
        Attempt.node_id == node_id, Attempt.state.in_(active_attempt_states())))
    return any(spec.get("bundle") == sha256 for spec in specs)
