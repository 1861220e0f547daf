"""The reconciler: the clouds' tagged instances against the launch rows.

Only instances tagged with this exchange's id are looked at, so nothing else in the account is
ever touched. An instance whose launch is ended, failed, unknown, or being terminated is
terminated (an orphan: e.g. a coordinator killed between the cloud call and its commit, whose
launch the restart then ended). An instance of a ``requested`` launch that no call in this
process is making is adopted (the crash fell between the call and the commit). A launch whose
instance the cloud no longer lists — after a grace, since a new instance may not be listed at
once — is ended; a ``requested`` one with no instance after the grace was never made. Each
member of a gang is judged so; a gang left partly made (a coordinator killed between its
members) is ended whole by the launcher's next pass (``gangs.broken``), and the placement
groups of gangs with no live launch are deleted here (``gangs.sweep``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bourse.clouds.base import CloudError, Instance
from bourse.core.states import LAUNCH_LIVE, LaunchState
from bourse.server.db.schema import Launch
from bourse.server.launcher import gangs
from bourse.server.services import launches

if TYPE_CHECKING:
    from bourse.server.launcher.launcher import Launcher

log = logging.getLogger(__name__)
LISTING_GRACE_S = 60.0  # a launch younger than this may not be listed by the cloud yet
# a launch requested before this coordinator started has no call in progress: once the cloud
# has had this long since the start to list its instance, it never made one
RESTART_GRACE_S = 10.0


@dataclass
class Findings:
    """What one pass decided."""

    orphans: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    adopted: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # launches whose instance is gone
    never_made: list[str] = field(default_factory=list)


def judge(instances: Sequence[Instance], rows: dict[str, Launch], in_flight: set[str], *,
          now: float, provider: str, started_at: float = float("-inf")) -> Findings:
    """Pure: the decisions of one pass over one cloud (``rows``: launches by id);
    ``started_at``: when this coordinator's launcher started."""
    out = Findings()
    seen: set[str] = set()
    for inst in instances:
        launch = rows.get(inst.launch_id or "")
        if launch is not None:
            seen.add(launch.id)
        if not inst.alive or (launch is not None and launch.id in in_flight):
            continue
        if launch is None or launch.state not in LAUNCH_LIVE or (
                launch.state == LaunchState.TERMINATING):
            out.orphans[(provider, inst.region)].append(inst.id)
        elif launch.state == LaunchState.REQUESTED:
            out.adopted.append(launch.id)
    for launch in rows.values():
        if (launch.id in seen or launch.id in in_flight or launch.provider != provider
                or launch.state not in LAUNCH_LIVE):
            continue
        if not _listed_long_enough(launch, now, started_at):
            continue
        (out.never_made if launch.state == LaunchState.REQUESTED else out.gone).append(launch.id)
    return out


def _listed_long_enough(launch: Launch, now: float, started_at: float) -> bool:
    """Whether the cloud has had time to list the launch's instance if it made one."""
    since = launch.launched_at or launch.requested_at
    if now - since >= LISTING_GRACE_S:
        return True
    before_start = launch.state == LaunchState.REQUESTED and launch.requested_at < started_at
    return before_start and now - started_at >= RESTART_GRACE_S


async def reconcile(launcher: Launcher) -> list[str]:
    terminated: list[str] = []
    exchange = await launcher.exchange_id()
    for name, provider in launcher.clouds.providers.items():
        try:
            instances = await asyncio.to_thread(provider.tagged, exchange,
                                                launcher.clouds.regions(name))
        except CloudError as exc:
            log.warning("reconciling %s: listing instances failed: %s", name, exc)
            continue
        terminated += await _pass(launcher, name, instances)
        await gangs.sweep(launcher, name, provider)
    return terminated


async def _pass(launcher: Launcher, name: str, instances: list[Instance]) -> list[str]:
    ids = {i.launch_id for i in instances if i.launch_id}
    now = launcher.clock()
    async with launcher.db.write() as session:
        rows = await _rows(session, name, ids)
        found = judge(instances, rows, launcher.in_flight, now=now, provider=name,
                      started_at=launcher.started_at)
        by_launch = {i.launch_id: i for i in instances if i.launch_id}
        for launch_id in found.adopted:
            await launches.launched(session, launch_id, by_launch[launch_id], now)
        for launch_id in found.never_made:
            await launches.failed(session, launch_id, "the cloud has no instance for it "
                                  "(the coordinator stopped before or during the call)", now)
        for launch_id in found.gone:
            await launches.mark_terminating(session, rows[launch_id],
                                            "the cloud no longer lists its instance", now)
        await launches.terminated(session, found.gone, now)
    for node_id in (rows[i].node_id for i in found.gone):
        await launcher.connections.close(node_id, "instance gone")
    return await _terminate_orphans(launcher, name, found)


async def _rows(session: AsyncSession, name: str, ids: set[str]) -> dict[str, Launch]:
    live = (await session.scalars(select(Launch).where(
        Launch.provider == name, Launch.state.in_(LAUNCH_LIVE)))).all()
    tagged = (await session.scalars(select(Launch).where(Launch.id.in_(ids)))).all() if ids else []
    return {row.id: row for row in [*live, *tagged]}


async def _terminate_orphans(launcher: Launcher, name: str, found: Findings) -> list[str]:
    provider = launcher.clouds.providers[name]
    done: list[str] = []
    for (_, region), ids in found.orphans.items():
        shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        log.warning("reconciler: terminating %d orphan instance(s) in %s %s: %s", len(ids),
                    name, region, shown)
        try:
            await asyncio.to_thread(provider.terminate, region, ids)
            done += ids
        except CloudError as exc:
            log.warning("terminating orphans failed: %s; next pass retries", exc)
    return done
