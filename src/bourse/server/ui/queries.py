"""The few reads the pages need that the API's services do not offer: searching jobs by name or
id, node names for a page of jobs, and the jobs that belong to app runs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.server.db.schema import Job, Node

RUN_JOBS_LIMIT = 2000  # the runs page shows the runs of the newest this many named jobs


async def search_jobs(session: AsyncSession, state: str | None, text: str,
                      limit: int) -> Sequence[Job]:
    """Newest first; ``text`` matches anywhere in the name or the id, ignoring case."""
    query = select(Job).order_by(Job.created_at.desc(), Job.id.desc()).limit(limit)
    if state is not None:
        query = query.where(Job.state == state)
    if text:
        needle = text.lower()
        query = query.where(or_(func.lower(Job.name).contains(needle, autoescape=True),
                                func.lower(Job.id).contains(needle, autoescape=True)))
    return (await session.scalars(query)).all()


async def node_names(session: AsyncSession, ids: Iterable[str | None]) -> dict[str, str]:
    wanted = {i for i in ids if i}
    if not wanted:
        return {}
    rows = await session.execute(select(Node.id, Node.name).where(Node.id.in_(wanted)))
    return {node_id: name for node_id, name in rows.tuples()}


async def run_jobs(session: AsyncSession, limit: int = RUN_JOBS_LIMIT) -> Sequence[Job]:
    """The newest jobs whose name looks like ``<run_id>/<stage>``."""
    query = (select(Job).where(Job.name.contains("/", autoescape=True))
             .order_by(Job.created_at.desc(), Job.id.desc()).limit(limit))
    return (await session.scalars(query)).all()
