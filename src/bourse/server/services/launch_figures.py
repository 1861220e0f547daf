"""Each cloud's launch figures (``core.launch_figures``), read from the launch rows of the
window: a query per call, of the few columns a record is made of (``bourse clouds`` and
``/metrics`` ask now and then; the window holds a few thousand rows at most)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.core.launch_figures import WINDOW_S, WITHDRAWN, LaunchFigures, LaunchRecord, figures
from bourse.core.states import LaunchState
from bourse.protocol.clouds import LaunchFiguresView
from bourse.server.db.schema import Launch

_RECORD = (Launch.provider, Launch.state, Launch.requested_at, Launch.enrolled_at,
           Launch.terminated_at, (Launch.reason == WITHDRAWN).label("withdrawn"))


async def launch_figures(session: AsyncSession, now: float,
                         window_s: float = WINDOW_S) -> dict[str, LaunchFigures]:
    """Per provider that had a launch requested in the window."""
    rows = await session.execute(select(*_RECORD).where(
        Launch.requested_at >= now - window_s, Launch.requested_at <= now))
    return figures((LaunchRecord(r.provider, LaunchState(r.state), r.requested_at,
                                 r.enrolled_at, r.terminated_at, bool(r.withdrawn))
                    for r in rows.all()), now, window_s)


async def success_rates(session: AsyncSession, now: float) -> dict[str, float | None]:
    """Per provider, its launch success rate over the window (the ``sla`` of its launchable
    offers: ``Clouds.rate``)."""
    return {name: f.success_rate for name, f in (await launch_figures(session, now)).items()}


def view_of(found: LaunchFigures | None, window_s: float = WINDOW_S) -> LaunchFiguresView:
    """The wire view (a cloud with no launch in the window has all zeros)."""
    if found is None:
        return LaunchFiguresView(window_s=window_s)
    return LaunchFiguresView(
        window_s=window_s, launches=found.launches, enrolled=found.enrolled,
        failed=found.failed, in_flight=found.in_flight, withdrawn=found.withdrawn,
        success_rate=found.success_rate, ready_median_s=found.ready_median_s,
        ready_p90_s=found.ready_p90_s)
