"""Launches a provider with a pending timeout has not started (a cluster's pod that no node
takes, ``clouds.base.Explains``): past the timeout they end, blocked, in the provider's own
words, and the job tries the next offer."""

from __future__ import annotations

import asyncio
from collections.abc import Set

from sqlalchemy import select

from bourse.core.states import LaunchState
from bourse.core.units import describe_duration
from bourse.server.db.database import Database
from bourse.server.db.schema import Launch
from bourse.server.launcher import decide
from bourse.server.launcher.clouds import Clouds


async def stuck(db: Database, clouds: Clouds, in_flight: Set[str],
                now: float) -> dict[str, str]:
    """Booting, unenrolled launches past their provider's pending timeout whose machine the
    provider says is not started: launch id -> why."""
    timeouts = clouds.pending_timeouts()
    if not timeouts:
        return {}
    async with db.read() as session:
        rows = (await session.scalars(select(Launch).where(
            Launch.state == LaunchState.BOOTING, Launch.provider.in_(list(timeouts)),
            Launch.enrolled_at.is_(None), Launch.instance_id.is_not(None)))).all()
    out: dict[str, str] = {}
    for row in rows:
        limit = timeouts[row.provider]
        if row.id in in_flight or now - row.requested_at <= limit or row.instance_id is None:
            continue
        why = await asyncio.to_thread(clouds.explain, row.provider, row.region, row.instance_id)
        if why is not None:
            out[row.id] = (f"not started within the pending timeout "
                           f"({describe_duration(limit)}): {why}")
    return out


def verdict(why: str | None, facts: decide.Facts) -> decide.Verdict | None:
    """The end of a stuck launch that is still booting unenrolled (it may have enrolled since
    it was asked about), else None."""
    if why is None or facts.state is not LaunchState.BOOTING or facts.enrolled:
        return None
    return decide.Verdict("terminate", why, block=True)
